"""Results worth keeping between runs, each with what it was computed from, never used once that changed.

A learner re-runs the lab after every edit; most of what the modes compute first does not change
between two runs: the workload's reference output and FLOPs, 03's exported and built models, this
machine's calibration. Each is kept as a *record* under ``.lab_cache/`` (gitignored; delete it at
any time) together with its inputs:

- the **files** it read: every file opened or imported while it was computed (:class:`Watch`),
  outside the Python installation and its site-packages, each with its sha256: the workload file,
  the modules beside it, weights it loads;
- the **toolchain**: Python, and the versions of torch, torch_npu, numpy, onnx, onnxruntime;
- what the caller adds (the lab's own code that computed it, a variant list, the machine).

:func:`load` returns a record only when every one of those is as it was: an edited model, a new
torch or a changed lab file means the work is done again. What a model reads other than files
(the environment, the clock, the network) is not seen: ``MSPROF_LAB_CACHE=off`` turns every
record off. Standard library only, so noxfile.py can look records up without starting the lab.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import sysconfig
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
CACHE_VAR = "MSPROF_LAB_CACHE"  # a folder for the records, or "off"
DEFAULT_DIR = REPO_ROOT / ".lab_cache"
TOOLCHAIN = ("torch", "torch_npu", "numpy", "onnx", "onnxruntime")


def cache_dir() -> Path | None:
    """Where records live; None when $MSPROF_LAB_CACHE is ``off``."""
    value = os.environ.get(CACHE_VAR, "").strip()
    if value.lower() in {"off", "0", "no", "false"}:
        return None
    return Path(value).expanduser() if value else DEFAULT_DIR


def toolchain() -> dict[str, str | None]:
    """Python's version and the installed versions of the packages results depend on (None: absent)."""
    found: dict[str, str | None] = {"python": sys.version.split()[0]}
    for name in TOOLCHAIN:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def sha256_of(path: Path) -> str | None:
    """The file's sha256, or None when it cannot be read (gone, a folder, no permission)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def fingerprint(paths) -> dict[str, str]:
    """``{path: sha256}`` of the readable files among ``paths``."""
    hashes = {str(p): sha256_of(Path(p)) for p in sorted({str(p) for p in paths})}
    return {p: h for p, h in hashes.items() if h is not None}


def _installed_roots() -> tuple[str, ...]:
    """Folders whose files belong to the Python installation (their versions stand for them)."""
    roots = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        *(sysconfig.get_paths().get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")),
    }
    roots |= {p for p in sys.path if "site-packages" in p or "dist-packages" in p}
    return tuple(sorted({os.path.realpath(r) + os.sep for r in roots if r}))


_WATCHES: list[set[str]] = []
_HOOKED = False


def _audit(event: str, args: tuple) -> None:
    if not _WATCHES or event != "open":
        return
    path, mode = args[0], args[1] if len(args) > 1 else "r"
    if (
        isinstance(path, (str, bytes, os.PathLike))
        and not isinstance(path, int)
        and (mode is None or not any(c in str(mode) for c in "wax+"))
    ):
        for seen in _WATCHES:
            seen.add(os.fsdecode(path))


def _lab_code() -> tuple[str, ...]:
    """The lab's own code: a record names the part of it that computed the result in its ``extra``."""
    return (str(REPO_ROOT / "common") + os.sep, *(str(p) + os.sep for p in sorted(REPO_ROOT.glob("0[1-4]_*/src"))))


class Watch:
    """``with Watch() as read: ...``: afterwards ``read.files`` are the files the block opened for reading or
    imported, outside the Python installation, the lab's own code, the cache and the system's pseudo-files
    (absolute paths; a traceback or a warning reads the sources on the stack, which are not the model's)."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._modules: set[str] = set()
        self.files: set[Path] = set()

    def __enter__(self) -> Watch:
        global _HOOKED
        if not _HOOKED:  # an audit hook cannot be removed: one for the process, idle outside a Watch
            sys.addaudithook(_audit)
            _HOOKED = True
        self._modules = set(sys.modules)
        _WATCHES.append(self._seen)
        return self

    def __exit__(self, *exc: object) -> None:
        _WATCHES.remove(self._seen)
        imported = {getattr(sys.modules.get(m), "__file__", None) for m in set(sys.modules) - self._modules}
        skip = (*_installed_roots(), *_lab_code(), "/proc/", "/sys/", "/dev/")
        where = cache_dir()
        if where is not None:
            skip += (os.path.realpath(where) + os.sep,)
        files = set()
        for name in self._seen | {f for f in imported if f}:
            real = os.path.realpath(name)
            if real.startswith(skip) or "__pycache__" in real or not os.path.isfile(real):
                continue
            files.add(Path(real))
        self.files = files


def record_path(kind: str, key: str) -> Path | None:
    where = cache_dir()
    if where is None:
        return None
    name = hashlib.sha256(key.encode()).hexdigest()[:24]
    return where / kind / f"{name}.json"


def inputs_of(files, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a record is valid for: the files' hashes, the toolchain, and ``extra`` (JSON values)."""
    return {"files": fingerprint(files), "toolchain": toolchain(), "extra": extra or {}}


def still_valid(inputs: dict[str, Any], extra: dict[str, Any] | None = None) -> bool:
    """Whether ``inputs`` (as saved) still hold: same toolchain, same extra, every file unchanged."""
    if inputs.get("toolchain") != toolchain() or inputs.get("extra") != (extra or {}):
        return False
    return all(sha256_of(Path(p)) == h for p, h in inputs.get("files", {}).items())


def load(kind: str, key: str, extra: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The record ``kind/key`` when it exists, reads, and its inputs still hold; else None."""
    path = record_path(kind, key)
    if path is None or not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("key") != key or not still_valid(record.get("inputs", {}), extra):
        return None
    record["path"] = str(path)
    return record


def save(kind: str, key: str, inputs: dict[str, Any], result: dict[str, Any]) -> Path | None:
    """Keep ``result`` (JSON values) as the record ``kind/key`` with its ``inputs`` (:func:`inputs_of`), written
    whole or not at all. A cache that cannot be written is skipped: the next run computes it again."""
    path = record_path(kind, key)
    if path is None:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False, encoding="utf-8") as f:
            json.dump({"key": key, "inputs": inputs, "result": result}, f)
        os.chmod(f.name, 0o644)
        os.replace(f.name, path)
    except OSError:
        return None
    return path


def side_file(record: str | Path, suffix: str) -> Path:
    """A file kept beside a record (e.g. its arrays), named after it."""
    return Path(record).with_suffix(suffix)
