"""Loading a workload: the default TinyMLP (workloads/tiny_mlp.py) or a workload file of the user's.

A workload file (``--workload FILE`` or ``MSPROF_LAB_WORKLOAD=FILE``) is a Python file with ``build_model()``
and ``make_input()``, optionally ``loss(output, input)`` and ``EXPECT`` (see docs/own_model.md). The file is
imported and run as it is: it is the user's own code, trusted like any script they run. TinyMLP is such a
file too, loaded the same way; the lab reports it as "TinyMLP" with no path (the default).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import cache
from common.errors import LabError
from common.workload.expect import expectations
from common.workload.model import Workload, first_line
from common.workload.record import Record
from common.workload.requires import declared, environment_dir

ENV_VAR = "MSPROF_LAB_WORKLOAD"
TINY_MLP_FILE = Path(__file__).resolve().parents[2] / "workloads" / "tiny_mlp.py"
TINY_MLP = "TinyMLP"  # the default's name in run_info.json and every report

_HELP = "see docs/own_model.md for what a workload file defines"

_LOADED: dict[tuple[str, str], Workload] = {}


def _tiny_mlp_sha256() -> str:
    """TinyMLP's identity: the sha256 of its file's bytes."""
    return hashlib.sha256(TINY_MLP_FILE.read_bytes()).hexdigest()


@functools.cache
def tiny_mlp() -> Workload:
    """The default workload: workloads/tiny_mlp.py, named TinyMLP, with no path. Its forward runs when its
    reference is first asked for (or never, when its record in .lab_cache holds)."""
    sha = _tiny_mlp_sha256()
    return _load(TINY_MLP_FILE, sha, TINY_MLP, None, check=False)


@functools.cache
def tiny_mlp_module():
    """workloads/tiny_mlp.py as a module: ``build_model(hidden)``, ``make_input(batch, hidden)``, ``BATCH``, ..."""
    return _import(TINY_MLP_FILE, _tiny_mlp_sha256())


def workload_file(path: str | os.PathLike | None) -> tuple[Path, str] | None:
    """The workload file of ``path``, else of $MSPROF_LAB_WORKLOAD (resolved) and its sha256; None: TinyMLP."""
    origin = ""
    if path is None or str(path) == "":
        path = os.environ.get(ENV_VAR) or None
        origin = f" (from {ENV_VAR})"
    if path is None:
        return None
    file = Path(path).expanduser()
    if not file.is_absolute():  # from the current directory, and the message says where that led
        origin += f" (looked for {file.resolve()})"
    if not file.exists():
        raise LabError(
            f"workload file {file}{origin} does not exist",
            f"pass the path of a Python file that defines build_model() and make_input(); {_HELP}",
        )
    if not file.is_file():
        raise LabError(
            f"workload file {file}{origin} is not a file",
            f"pass the path of a Python file that defines build_model() and make_input(); {_HELP}",
        )
    try:
        data = file.read_bytes()
    except OSError as err:
        raise LabError(
            f"workload file {file}{origin} cannot be read: {err.strerror}", "check its permissions"
        ) from None
    return file.resolve(), hashlib.sha256(data).hexdigest()


def workload_identity(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """``{name, path, sha256}`` of the workload :func:`load_workload` would load, without importing it
    (a mode that profiles something else records which workload the run was given)."""
    found = workload_file(path)
    if found is None:
        return {"name": TINY_MLP, "path": None, "sha256": _tiny_mlp_sha256()}
    resolved, sha = found
    return {"name": resolved.stem, "path": str(resolved), "sha256": sha}


def load_workload(path: str | os.PathLike | None = None, *, check: bool = True) -> Workload:
    """The workload of ``path``, else of $MSPROF_LAB_WORKLOAD, else TinyMLP; loaded once per file content.

    Loading imports the file, builds the model and runs one forward on its input, so every mistake
    shows here, before any output folder is touched. ``check=False`` skips that forward (a profiled
    program whose file the lab checked already: the forward would be profiled too).
    """
    found = workload_file(path)
    if found is None:
        return tiny_mlp()
    resolved, sha = found
    key = (str(resolved), sha)
    if key not in _LOADED:
        workload = _load(resolved, sha, resolved.stem, str(resolved), check=check)
        if workload._reference is None:  # not checked (check=False) and no record: not kept for later calls
            return workload
        _LOADED[key] = workload
    return _LOADED[key]


def _load(file: Path, sha: str, name: str, path: str | None, *, check: bool) -> Workload:
    """The workload of ``file``: from its valid record (the file is imported only when the model is built),
    else imported now and, with ``check``, its forward run."""
    workload = _restored(file, sha, name, path)
    if workload is None:
        with cache.Watch() as read:
            workload = _from_module(_import(file, sha, beside=path is not None), file, sha, name, path)
        workload._read |= read.files
        if check:
            workload._reference_arrays()  # the forward that checks the model accepts its input
    return workload


def _restored(file: Path, sha: str, name: str, path: str | None) -> Workload | None:
    """The workload of ``file`` from its valid record: the file is imported only when the model is built."""
    found = Record.find(path, name, sha)
    if found is None:
        return None
    module = functools.cache(lambda: _import(file, sha, beside=path is not None))
    result = found["result"]
    loss = (lambda output, x: module().loss(output, x)) if result.get("has_loss") else None
    work = Workload(
        name,
        path,
        sha,
        _guard(lambda: module().build_model(), file, "build_model"),
        _guard(lambda: module().make_input(), file, "make_input"),
        loss,
        dict(result["expectations"]),
    )
    Record.restore(work, found)
    return work


def _import(file: Path, sha: str, *, beside: bool = True):
    """Import the file as a module of its own (never through a shell); with ``beside``, its folder joins
    sys.path's end so that it can import the modules next to it (a user's file; TinyMLP needs none)."""
    name = f"msprof_lab_workload_{sha[:16]}"
    loader = importlib.machinery.SourceFileLoader(name, str(file))
    spec = importlib.util.spec_from_file_location(name, file, loader=loader)
    module = importlib.util.module_from_spec(spec)
    if beside and str(file.parent) not in sys.path:
        sys.path.append(str(file.parent))
    sys.modules[name] = module  # dataclasses and pickling look their module up here
    try:
        loader.exec_module(module)
    except SyntaxError as err:
        sys.modules.pop(name, None)
        raise LabError(
            f"workload file {file}: syntax error at line {err.lineno}: {err.msg}", "fix the Python syntax in that file"
        ) from None
    except ImportError as err:
        sys.modules.pop(name, None)
        raise import_failed(file, err) from None
    except (Exception, SystemExit) as err:  # noqa: BLE001 (the user's code, run at import)
        sys.modules.pop(name, None)
        raise LabError(
            f"workload file {file}: running it failed: {first_line(err)}",
            "fix the code at its top level (it runs when the lab imports the file)",
        ) from None
    return module


def import_failed(file: Path, err: ImportError) -> LabError:
    """The one line for a workload file whose import failed: which Python lacked the package, and where the lab
    keeps (or would build) the environment of the file's REQUIRES, or how to declare them."""
    here = f"this Python ({sys.prefix})"
    requirements = declared(file)
    if not requirements:
        return LabError(
            f"workload file {file}: an import failed in {here}: {first_line(err)}",
            'declare what it needs at its top, e.g. REQUIRES = ["torchvision==0.28.0"], and the lab '
            "installs it into an environment of its own (docs/own_model.md); or fix the import",
        )
    venv = environment_dir(requirements)
    if Path(sys.prefix).resolve() == venv.resolve():
        return LabError(
            f"workload file {file}: an import failed in the environment of its REQUIRES ({venv}): {first_line(err)}",
            "check the versions in REQUIRES (nox rebuilds the environment when they change)",
        )
    what = f"workload file {file}: an import failed in {here}: {first_line(err)}; its REQUIRES are in {venv}"
    if (venv / "bin" / "python").exists():
        return LabError(
            what,
            f"run it with PYTHON={venv}/bin/python, or through nox, which uses that environment: "
            f"nox -s cmdline ascendc pyacl pytorch -- 0 --workload {file}",
        )
    return LabError(
        f"{what}, not built yet",
        f"build it with: nox -s workload -- --workload {file} (then every "
        f"mode session uses it, or PYTHON={venv}/bin/python)",
    )


def _from_module(module, file: Path, sha: str, name: str, path: str | None) -> Workload:
    missing = [f for f in ("build_model", "make_input") if not callable(getattr(module, f, None))]
    if missing:
        raise LabError(
            f"workload file {file} defines no {' and no '.join(f + '()' for f in missing)}",
            f"add def build_model() returning the nn.Module and def make_input() returning its input; {_HELP}",
        )
    loss = getattr(module, "loss", None)
    if loss is not None and not callable(loss):
        raise LabError(
            f"workload file {file}: loss is not a function but {type(loss).__name__}",
            "define loss(output, input) returning a scalar tensor, or remove it",
        )
    expect = expectations(getattr(module, "EXPECT", {}), file)
    return Workload(
        name,
        path,
        sha,
        _guard(module.build_model, file, "build_model"),
        _guard(module.make_input, file, "make_input"),
        loss,
        expect,
    )


def _guard(func: Callable[[], Any], file: Path, what: str) -> Callable[[], Any]:
    """``func()`` with any failure raised as a LabError naming the file."""

    def call():
        try:
            return func()
        except LabError:
            raise
        except Exception as err:  # noqa: BLE001 (the user's code)
            raise LabError(
                f"workload file {file}: {what}() failed: {first_line(err)}",
                f"fix {what}() in that file (it is called with no arguments)",
            ) from None

    return call
