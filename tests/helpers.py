"""What the tests share: the lab they run (a private copy of the checkout), the fixtures, running the lab as a
user does, loading a lesson file, and the planted sandboxes of the safety and fault tests."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

CHECKOUT = Path(__file__).resolve().parent.parent  # the repository these tests belong to
# The lab the tests run and read: a private copy of the checkout for each pytest process once use_private_lab() has
# run (tests/conftest.py does, before any test module is imported), so no two processes ever share its folders.
ROOT = CHECKOUT
FIXTURES = CHECKOUT / "tests" / "fixtures"
MODES = ("01_cmdline", "02_api_AscendC", "03_api_pyAcl", "04_pyTorch")
# Shell syntax a user (or a script that builds a command line) could pass where the lab expects a
# device id or a program argument: it must be refused, or passed on inert, never run.
SHELLISH = ["0;rm -rf /", "$(touch PWNED)", "`touch PWNED`", "0\nrm -rf /", "0 && touch PWNED", "0|touch PWNED"]


def lab_env(**extra: str) -> dict[str, str]:
    """Environment for running the lab's scripts: this interpreter, the portable backend."""
    env = dict(os.environ)
    env.update(PYTHON=sys.executable, MSPROF_LAB_BACKEND="portable", PYTHONPATH=str(ROOT), KINETO_LOG_LEVEL="5")
    env.update(extra)
    return env


def run(args: list[str], timeout: float = 300, **extra: str) -> subprocess.CompletedProcess:
    """Run a command from the repo root, as a user would, capturing its output."""
    return subprocess.run(
        args, cwd=ROOT, env=lab_env(**extra), capture_output=True, text=True, timeout=timeout, check=False
    )


def error_lines(stderr: str) -> list[str]:
    """The ``Error:`` lines of a run's stderr (user mistakes must give exactly one)."""
    return [line for line in stderr.splitlines() if line.startswith("Error:")]


def msprof_output(root: Path) -> Path:
    """The single mindstudio_profiler_output/ folder under ``root``."""
    (found,) = list(root.glob("PROF_*/mindstudio_profiler_output"))
    return found


def remove_lab_output(path: Path) -> None:
    """Delete an output folder a test had the lab write, only if the lab made it (it carries the marker)."""
    from common.formats import rundir

    if (path / rundir.MARKER).is_file():
        shutil.rmtree(path)


def assert_workload_checks(stdout: str, key: str, workload: str, families: set[str]) -> None:
    """A shipped workload's run of mode ``key``: every forward (step) records the same ops, of these families
    among others, TinyMLP's lesson check [N/A], the output matched, nothing failed."""
    (same,) = [
        line
        for line in stdout.splitlines()
        if re.match(
            rf"\[PASS\] every (forward|step) records the same "
            rf"ops \({key}",
            line,
        )
    ]
    listed = re.search(r"each \d+ ops \(([^)]*)\) as the first", same)[1]
    assert families <= {part.split()[0] for part in listed.split(", ")}, same
    assert f"[N/A] top family ({key}): not applicable: {workload} declares no EXPECT['top_family']" in stdout
    assert f"[PASS] output matches fp32 reference ({key})" in stdout and "[FAIL]" not in stdout


def load_lesson(relative: str) -> ModuleType:
    """Import a mode's lesson file (e.g. ``04_pyTorch/src/model_with_profiler.py``) once, by its file name.

    The module's folder goes on ``sys.path`` so the files beside it import as they do under run.sh.
    """
    path = ROOT / relative
    name = path.stem
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(path):
        return sys.modules[name]
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


# ----- sandboxes with planted markers (safety and fault tests) ------------------------------------------
def tree_state(root: Path) -> dict[str, str]:
    """Every path under ``root`` with what it is: file content hash, symlink target, or dir."""
    state = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            state[rel] = "link -> " + os.readlink(path)
        elif path.is_dir():
            state[rel] = "dir"
        else:
            state[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return state


def plant(folder: Path, *, marker: bool = True) -> Path:
    """A folder with a precious file and (unless ``marker=False``) the lab's marker: where the lab must not delete."""
    from common.formats import rundir

    folder.mkdir(parents=True, exist_ok=True)
    if marker:
        (folder / rundir.MARKER).write_text("planted")
    (folder / "precious.txt").write_text(f"do not delete {folder.name}")
    return folder


# What a private copy of the lab leaves behind (paths from the lab's root; * spans folders): every output, build,
# model, record and lock a run makes, and the environments, history and logs beside them.
NOT_COPIED = (
    "*prof_out*",
    "*prof_runs",
    "*prof_sweep",
    "*.msprof_lab.lock",
    "02_api_AscendC/build",
    "03_api_pyAcl/model",
    "agree_out",
    "precision_out",
    "npu_dryrun",
    ".lab_cache",
    ".nox",
    ".git",
    "*bench/out",
    "tests/corpus/last_run.log",
    "tests/zoo/last_run.log",
    "tests_artifacts",
)
LAB = ("common", "workloads", *MODES, "pyproject.toml")  # what a run of the lab needs
WHOLE = (*LAB, "tests", "docs", "README.md", "SECURITY.md", "noxfile.py", ".ci")  # and what the tests read beside it


def copy_lab(target: Path, *, whole: bool = False, source: Path | None = None) -> Path:
    """A private copy of the lab as a user clones it (``whole``: with its tests and docs), without what runs in
    ``source`` (default: the lab the tests run) left there (NOT_COPIED): the one way the tests copy the lab.

    Its bytecode comes along: still valid, since the copy keeps each source file's time and size."""
    import fnmatch

    source = source or ROOT

    def left_out(folder: str, names: list[str]) -> set[str]:
        where = Path(folder).relative_to(source)
        return {n for n in names if any(fnmatch.fnmatch((where / n).as_posix(), p) for p in NOT_COPIED)}

    for name in WHOLE if whole else LAB:
        if (source / name).is_dir():
            shutil.copytree(source / name, target / name, ignore=left_out)
        elif (source / name).is_file():
            shutil.copy2(source / name, target / name)
    return target


def use_private_lab(target: Path) -> Path:
    """Make ``target`` a whole copy of the checkout and the lab this process's tests run: ``ROOT``, the first entry
    of ``sys.path`` (so ``common`` is imported from it) and every process they start. The shared environments of
    ``.nox`` (msprof-analyze's, built once, under a lock) are the checkout's, linked."""
    global ROOT
    copy_lab(target, whole=True, source=CHECKOUT)
    (CHECKOUT / ".nox").mkdir(exist_ok=True)
    (target / ".nox").symlink_to(CHECKOUT / ".nox", target_is_directory=True)
    sys.path.insert(0, str(target))
    for name in [m for m in sys.modules if m == "common" or m.startswith("common.")]:
        del sys.modules[name]  # imported from the checkout before this: imported again from the copy
    ROOT = target
    return target


def assert_nothing_ran(where: Path) -> None:
    """No ``PWNED`` file appeared: nothing user-supplied was run through a shell."""
    assert not list(where.rglob("PWNED*")) and not list(ROOT.glob("PWNED*"))


def code_lines(text: str) -> int:
    """Lines of a Python lesson that are code: its docstrings, comment-only and blank lines are not counted (the
    budget is on code, so a lesson keeps its explanations and PEP 8's spacing)."""
    docstrings = set()
    for node in ast.walk(ast.parse(text)):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            docstrings |= set(range(body[0].lineno, body[0].end_lineno + 1))
    return sum(
        1
        for i, line in enumerate(text.splitlines(), 1)
        if i not in docstrings and line.strip() and not line.strip().startswith("#")
    )


def onnx_graph(nodes, inputs, initializers=(), outputs=("y",)):
    """A one-graph ONNX model of ``nodes``: float inputs and initializers (name, shape), outputs of unknown shape."""
    from onnx import TensorProto, helper

    value = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n, shape in inputs]
    inits = [helper.make_tensor(n, TensorProto.FLOAT, shape, [0.0] * math.prod(shape)) for n, shape in initializers]
    out = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs]
    return helper.make_model(
        helper.make_graph(nodes, "g", value, out, inits), opset_imports=[helper.make_opsetid("", 17)]
    )


def laid_out(report) -> tuple[str, str, str]:
    """A :class:`common.render.report.Report` in its three layouts: (text, Markdown, page)."""
    from common.render.html import report_page
    from common.render.text import render_markdown, render_text

    return render_text(report), render_markdown(report), report_page(report)


def dir_report(root: Path, verdicts=None, **options) -> tuple[str, str, str, list]:
    """The report of an output folder (common.modes.reports.directory_report) laid out: (text, Markdown, page,
    the integrity checks)."""
    from common.modes.reports import directory_report

    report, integrity = directory_report(root, verdicts, **options)
    return (*laid_out(report), integrity)


def cluster_text(report, verdicts=None, notes=None, full: bool = True) -> str:
    """The cluster view of an analysed capture as text."""
    from common.render.cluster import cluster_view

    return laid_out(cluster_view(report, verdicts, notes, full))[0]


def cluster_page(report, verdicts=None, notes=None, full: bool = True) -> str:
    """The cluster view of an analysed capture as a page."""
    from common.render.cluster import cluster_view

    return laid_out(cluster_view(report, verdicts, notes, full))[2]
