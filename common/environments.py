"""The Python environments the lab builds for itself: a venv holding dependency groups of pyproject.toml.

One builder for all of them: noxfile.py builds the shared environment (``.nox/lab-<backend>``)
with it, and ``common.collect.msprof_analyze`` the one msprof-analyze lives in
(``.nox/ecosystem``). Standard library only, so that noxfile.py can import it under whatever
Python runs nox.

An environment is rebuilt only when what it was built from changes: the requirements of its
groups (``include-group`` resolved), any requirements given beside them (a workload file's
``REQUIRES``: common/collect/workload_env.py), the Python building it, and whether it sees the
system's site packages. That is hashed into ``<venv>/.lab-stamp``, written last, so a build that was
interrupted is redone on the next use; an edit elsewhere in pyproject.toml rebuilds nothing.
"""

from __future__ import annotations

import compileall
import contextlib
import fcntl
import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from common.errors import LabError

REPO_ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = REPO_ROOT / "pyproject.toml"
STAMP = ".lab-stamp"
PIP = "pip>=25.1"  # the first pip with `pip install --group` (PEP 735 dependency groups)
PACKAGE_TESTS = r"/site-packages/[^/]+/(.+/)?tests?/"  # compileall -x: the test folders inside installed packages
# The lab's own Python code, run from the checkout rather than installed, and imported: the lesson files in the
# modes' src/ are run as programs (a script is compiled when it starts, never from a cache), so they are not listed.
LAB_CODE = ("common", "workloads")


def group_requirements(groups: list[str], pyproject: Path = PYPROJECT) -> list[str]:
    """The requirements of ``groups`` in ``pyproject``, with ``include-group`` entries resolved.

    On Python 3.10 (no tomllib) the whole ``[dependency-groups]`` table stands in for them.
    """
    text = pyproject.read_text()
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: any change to the table counts
        found = re.search(r"^\[dependency-groups\]$(.*?)(?=^\[|\Z)", text, re.MULTILINE | re.DOTALL)
        table = found.group(1) if found else ""
        missing = [g for g in groups if not re.search(rf"^{re.escape(g)}\s*=", table, re.MULTILINE)]
        if missing:
            raise LabError(f"{pyproject} has no dependency group {missing[0]!r}", "restore it from the repository")
        return [table]
    table = tomllib.loads(text).get("dependency-groups", {})

    def resolve(name: str, seen: tuple[str, ...]) -> list[str]:
        if name not in table:
            raise LabError(f"{pyproject} has no dependency group {name!r}", "restore it from the repository")
        if name in seen:
            raise LabError(f"{pyproject}: dependency group {name!r} includes itself", "fix its include-group")
        out: list[str] = []
        for item in table[name]:
            out += resolve(item["include-group"], (*seen, name)) if isinstance(item, dict) else [item]
        return out

    return [req for group in groups for req in resolve(group, ())]


def stamp_of(groups: list[str], system_site_packages: bool = False, requirements: Sequence[str] = ()) -> str:
    """What an environment of ``groups`` (and ``requirements`` beside them) is built from, hashed: kept in its
    ``.lab-stamp``."""
    made_of = {
        "groups": groups,
        "requirements": group_requirements(groups),
        "python": sys.version,
        "system_site_packages": system_site_packages,
    }
    if requirements:  # absent otherwise, so that the stamps of environments built before it was added still hold
        made_of["extra_requirements"] = list(requirements)
    return hashlib.sha256(json.dumps(made_of).encode()).hexdigest()


def _what_failed(text: str) -> str:
    """pip's first ``ERROR:`` line (which says what conflicts; its last one only points at its docs), else the last."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    return errors[0] if errors else lines[-1] if lines else "no output"


def is_built(
    venv: Path,
    groups: list[str],
    *,
    system_site_packages: bool = False,
    requirements: Sequence[str] = (),
    expect: tuple[str, ...] = (),
) -> bool:
    """``venv`` is complete and was built from exactly these groups and requirements (its stamp says so)."""
    venv = venv.parent.resolve() / venv.name
    stamp = venv / STAMP
    ready = [venv / "bin" / "python", *(venv / "bin" / name for name in expect)]
    return (
        all(path.exists() for path in ready)
        and all(runnable(venv / "bin" / name) for name in expect)
        and stamp.is_file()
        and stamp.read_text() == stamp_of(groups, system_site_packages, requirements)
    )


def ensure_environment(
    venv: Path,
    groups: list[str],
    *,
    system_site_packages: bool = False,
    requirements: Sequence[str] = (),
    verify: Callable[[Path], None] | None = None,
    keep: bool = False,
    expect: tuple[str, ...] = (),
    log: Callable[[str], object] = print,
    capture: bool = True,
    timeout_s: float | None = None,
    fix: str = "check the network and pyproject.toml",
) -> Path:
    """``venv``'s python, with ``groups`` installed by ``pip install --group`` and ``requirements`` (pip requirement
    strings) in the same install; built only when stale.

    ``expect`` names executables the groups put in ``<venv>/bin`` (a build that lacks one is an
    error, and one gone missing since triggers a rebuild). ``verify(python)``, when given, runs after
    the install and before the stamp is written: a LabError there leaves the environment unstamped
    (the next use rebuilds it). ``keep`` installs into the environment as it is, when one is there, instead
    of clearing it first (what is installed already stays unless pip must replace it). ``capture=False`` lets pip print to the terminal (nox); otherwise
    pip's error line goes into the error.
    """
    # Built where it really is: pip writes the scripts' interpreter path as given, and a path through a symlink
    # (a .nox linked from elsewhere) would leave them pointing at a folder that can go away.
    venv = venv.parent.resolve() / venv.name
    python = venv / "bin" / "python"
    want = stamp_of(groups, system_site_packages, requirements)

    def built() -> bool:
        return is_built(
            venv, groups, system_site_packages=system_site_packages, requirements=requirements, expect=expect
        )

    if built():
        return python
    with _building(venv):  # a second process wanting it meanwhile waits here, then finds it built
        if built():
            return python
        ready = [python, *(venv / "bin" / name for name in expect)]
        return _build(
            venv,
            groups,
            list(requirements),
            ready,
            want,
            system_site_packages,
            verify,
            keep,
            log,
            capture,
            timeout_s,
            fix,
        )


def runnable(script: Path) -> bool:
    """A script's ``#!`` interpreter exists (a moved or copied environment's scripts name the old one)."""
    try:
        with open(script, "rb") as f:
            first = f.readline(512)
    except OSError:
        return False
    if not first.startswith(b"#!"):
        return True  # a binary, or a script run by whoever calls it
    interpreter = first[2:].strip().split(b" ")[0].decode(errors="replace")
    return Path(interpreter).exists()


@contextlib.contextmanager
def _building(venv: Path):
    """An exclusive lock on ``<parent>/.<venv name>.lock`` while ``venv`` is built (dropped when the holder exits)."""
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _build(
    venv: Path,
    groups: list[str],
    requirements: list[str],
    ready: list[Path],
    want: str,
    system_site_packages: bool,
    verify: Callable[[Path], None] | None,
    keep: bool,
    log: Callable[[str], object],
    capture: bool,
    timeout_s: float | None,
    fix: str,
) -> Path:
    python, stamp = venv / "bin" / "python", venv / STAMP
    if stamp.exists():  # what it says is about to stop being true (a build kept on top of it, interrupted, is no build)
        stamp.unlink()
    made_of = [f"dependency groups {', '.join(groups)} of pyproject.toml"] if groups else []
    made_of += [", ".join(requirements)] if requirements else []
    log(f"building {venv}: {' and '.join(made_of)} (once; again only when they change)")
    site = ["--system-site-packages"] if system_site_packages else []
    bundled = bundled_pip()
    # With ensurepip's own wheel, pip is installed once, at the version needed, run from the wheel as ensurepip
    # runs it, and not byte-compiled on one core first: less than half the time of venv's pip and its upgrade.
    steps = (
        []
        if keep and python.exists()
        else [
            ("venv", [sys.executable, "-m", "venv", "--clear", "--without-pip", *site, str(venv)]),
            (
                "pip",
                [str(python), str(bundled / "pip"), "install", "--quiet", "--no-compile", "--ignore-installed", PIP],
            ),
        ]
        if bundled
        else [
            ("venv", [sys.executable, "-m", "venv", "--clear", *site, str(venv)]),
            ("pip upgrade", [str(python), "-m", "pip", "install", "--quiet", "--upgrade", PIP]),
        ]
    )
    steps += [
        # --no-compile, then compileall on every core: pip byte-compiles one file at a time (~9,300 files,
        # torch's 2,300 among them: 41 s of a 61 s install on the 2-core VM; compileall -j 0 took 27 s).
        # The packages' own test suites (~2,800 of those files: pandas, sympy, networkx, numpy, onnx) are
        # never imported by the lab and are left out.
        (
            "pip install",
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-compile",
                *(a for g in groups for a in ("--group", g)),
                *requirements,
            ],
        ),
        ("byte-compile", [str(python), "-m", "compileall", "-qq", "-j", "0", "-x", PACKAGE_TESTS, str(venv / "lib")]),
    ]
    for name, argv in steps:
        try:
            proc = subprocess.run(
                argv,
                cwd=REPO_ROOT,
                capture_output=capture,
                text=True,
                timeout=timeout_s,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise LabError(f"building {venv}: {name} gave no answer after {timeout_s:.0f} s", fix) from None
        if proc.returncode != 0 and name != "byte-compile":  # a package's unparsable test file is no failure
            said = _what_failed((proc.stderr or "") + (proc.stdout or "")) if capture else "its output is above"
            raise LabError(f"{venv} could not be built ({name} exited {proc.returncode}: {said})", fix)
    for path in ready:
        if not path.exists():
            raise LabError(
                f"{path} missing after building {venv}", f"check the {', '.join(groups)} group(s) in pyproject.toml"
            )
    if verify is not None:
        verify(python)
    stamp.write_text(want)
    return python


def bundled_pip() -> Path | None:
    """The pip wheel this Python's ensurepip carries, or None where a distribution has taken it out."""
    import ensurepip

    wheels = sorted((Path(ensurepip.__file__).parent / "_bundled").glob("pip-*.whl"))
    return wheels[-1] if wheels else None


def compile_lab_code(root: Path = REPO_ROOT) -> None:
    """Byte-compile the lab's own modules (``LAB_CODE``) whose cached bytecode is missing or stale.

    pip does this for an installed package; the lab runs from the checkout, so each nox session does
    it here, with the interpreter that built the environment (its stamp holds that interpreter's
    version, and bytecode is per version). Without it, where PYTHONDONTWRITEBYTECODE is set, every
    process of a run would compile the modules it imports again (0.1-0.15 s each). Up to date, it
    costs a stat per file (about 10 ms). A file that does not compile is left for its import to report.
    """
    for folder in LAB_CODE:
        if (root / folder).is_dir():
            compileall.compile_dir(root / folder, quiet=2)
