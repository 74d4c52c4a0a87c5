"""msprof lab: the learning path as nox sessions.

    nox -s cmdline ascendc pyacl pytorch -- 0    # every mode on device 0 (the default), then agree
    nox -s cmdline pyacl pytorch -- 0 --workload my_model.py   # your model instead of TinyMLP
    nox -s pytorch -- 0 --repeat 3               # a mode 3 times: <mode>/prof_runs/1..3 for compare
    nox -s agree                                 # the cross-mode verdict on the last outputs
    nox -s sweep                                 # 04 over a grid of sizes: host-bound -> compute-bound
    nox -s ddp -- 2                              # 04 on 2 ranks: cluster view and slow-rank demo
                                                 # (sweep, ddp and ecosystem take --workload FILE too)
    nox -s tests                                 # the test suite
    nox -s tests -- -m "not e2e"                 # its fast part (tests/unit), in seconds
    nox -s bench                                 # the lab at real-model scale beside polars, pandas, msprof-analyze
    nox -s npu_dryrun -- 3                       # every mode's NPU path against recording stand-ins (no NPU)
    nox -s corpus                                # 20+ models of the kinds people bring, every mode and agree

``--workload FILE`` (or ``MSPROF_LAB_WORKLOAD=FILE`` when no flag is given) points every mode
script at a workload file (docs/own_model.md); a relative path is taken from the directory nox
was started in. The file is loaded and its model run once, before the first mode starts: a
broken one stops everything with one line (the other modes are skipped, nothing is written), and
the scripts get it as an absolute path. After the four modes have run in one nox invocation (in
any order, whether they passed or failed), the cross-mode ``agree`` step follows by itself. The backend is detected once, here, and printed before anything runs.
Every session uses one shared environment (``.nox/lab-<backend>``), built on first use and
rebuilt only when its dependency groups in ``pyproject.toml`` change (common/environments.py,
which also builds msprof-analyze's ``.nox/ecosystem``). On an NPU machine that environment
sees the system's torch, torch_npu and CANN's ``acl`` (system site packages; torch is not
reinstalled); on the portable backend it pins the CPU build of torch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import NamedTuple

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from common.backend import detect, parse_device_id  # noqa: E402  (standard library only)
from common.environments import compile_lab_code, ensure_environment  # noqa: E402
from common.errors import LabError  # noqa: E402
from common.formats.rundir import prepare_output_dir  # noqa: E402

nox.needs_version = ">=2024.4"  # as in the dev group of pyproject.toml
nox.options.sessions = ["cmdline", "ascendc", "pyacl", "pytorch"]
nox.options.default_venv_backend = "none"  # sessions share the lab environment below instead

try:
    BACKEND = detect()
except LabError as err:  # e.g. MSPROF_LAB_BACKEND=npu on a machine without CANN
    sys.exit(f"Error: {err}")
print(BACKEND.banner(), flush=True)
# One id for every mode of this nox run, so their outputs can be told apart from older runs.
RUN_ID = os.environ.get("MSPROF_LAB_RUN_ID") or uuid.uuid4().hex
GROUPS = ["npu" if BACKEND.is_npu else "portable", "dev"]


def lab_python(session: nox.Session) -> str:
    """The shared environment's python, built (or rebuilt) when its dependency groups changed; the lab's own
    modules byte-compiled for it where stale (the environment is built from this interpreter)."""
    try:
        python = ensure_environment(ROOT / ".nox" / f"lab-{BACKEND.name}", GROUPS, system_site_packages=BACKEND.is_npu,
                                    log=session.log, capture=False)  # pip prints to the terminal as it works
    except LabError as err:
        session.error(str(err))
    compile_lab_code(ROOT)
    return str(python)


USAGE = "[device id 0..63] [--repeat N] [--workload FILE] [--threads N] [--train (pytorch)] [--kernel cpp|pyasc]"
MAX_REPEAT = 20
MAX_THREADS = 1024  # as common.modes.lesson.parse_threads
WORKLOAD_VAR = "MSPROF_LAB_WORKLOAD"  # as common.workload.ENV_VAR (that module imports numpy; nox need not have it)


class ModeArgs(NamedTuple):
    device: str
    repeat: int
    workload: str | None  # an absolute path, or None for the default workload (TinyMLP)
    threads: int | None = None  # --threads for the modes that run the workload; None: their default
    train: bool = False  # --train: mode 04 profiles training steps


# What this nox invocation has learnt, kept for its later sessions: the workload files already loaded
# and run, or refused as paths (key -> None, or the one line that refused it), and the mode sessions that have started.
WORKLOAD_CHECKED: dict[str, str | None] = {}
MODES_STARTED: set[str] = set()


def workload_path(value: str | None, origin: str, cwd: Path | str = ROOT) -> str | None:
    """The workload file as an absolute path (a relative one is taken from ``cwd``, the directory nox
    was started in), or None; a path that is not an existing file raises a LabError naming ``origin``
    and where it looked."""
    if not value:
        return None
    file = Path(value).expanduser()
    file = file if file.is_absolute() else Path(cwd) / file
    if not file.is_file():
        what = "does not exist" if not file.exists() else "is not a file"
        looked = "" if str(file) == value else f", looked for {file}"
        raise LabError(f"workload file {value} ({origin}{looked}) {what}",
                       "give the path of a Python file that defines build_model() and make_input() "
                       "(see docs/own_model.md)")
    return str(file.resolve())


def take_workload(session: nox.Session, args: list[str], usage: str) -> str | None:
    """Remove ``--workload FILE`` (or ``--workload=FILE``) from ``args``; the checked path, else
    $MSPROF_LAB_WORKLOAD's, else None. A bad value ends the session with one line."""
    value, origin = None, "--workload"
    for at, arg in enumerate(args):
        if arg == "--workload" or arg.startswith("--workload="):
            if arg == "--workload":
                value = args[at + 1] if at + 1 < len(args) else ""
                del args[at:at + 2]
            else:
                value = arg.split("=", 1)[1]
                del args[at]
            if not value or value.startswith("-"):
                session.error(f"Usage: nox -s {session.name} -- {usage} (--workload takes a file, got {value!r})")
            break
    else:
        value, origin = os.environ.get(WORKLOAD_VAR) or None, f"from ${WORKLOAD_VAR}"
    try:
        return workload_path(value, origin, getattr(session, "invoked_from", None) or ROOT)
    except LabError as err:  # said once: the later sessions of this invocation are skipped, as for a broken file
        refused = f"path|{value}"
        skip_if_refused(session, refused)
        WORKLOAD_CHECKED[refused] = str(err)
        session.error(str(err))


def skip_if_refused(session: nox.Session, key: str) -> None:
    """Skip this session when an earlier session of this invocation refused the workload under ``key``."""
    if WORKLOAD_CHECKED.get(key) is not None:
        session.skip("not run: the workload was refused above")


def workload_args(workload: str | None) -> list[str]:
    return ["--workload", workload] if workload else []


def take_number(session: nox.Session, args: list[str], flag: str, low: int, high: int) -> int | None:
    """Remove ``flag N`` from ``args``; N, or None when the flag is absent. A bad N ends the session with one line."""
    if flag not in args:
        return None
    at = args.index(flag)
    value = args[at + 1] if at + 1 < len(args) else ""
    if not value.isdigit() or not low <= int(value) <= high:
        session.error(f"Usage: nox -s {session.name} -- {USAGE} ({flag} takes {low}..{high}, got {value!r})")
    del args[at:at + 2]
    return int(value)


def mode_args(session: nox.Session) -> ModeArgs:
    """``-- [device] [--repeat N] [--workload FILE] [--threads N] [--train]`` (defaults 0, 1,
    $MSPROF_LAB_WORKLOAD or TinyMLP, each mode's own, inference), validated before anything runs.
    ``--train`` is mode 04's; the other modes profile inference and ignore it."""
    args = list(session.posargs)
    workload = take_workload(session, args, USAGE)
    repeat = take_number(session, args, "--repeat", 1, MAX_REPEAT) or 1
    threads = take_number(session, args, "--threads", 0, MAX_THREADS)
    train = "--train" in args
    args = [a for a in args if a != "--train"]
    if session.name == "ascendc" and "--kernel" in args:  # mode 02's choice; kernel_args passes it on
        del args[args.index("--kernel"):args.index("--kernel") + 2]
    if len(args) > 1:
        session.error(f"Usage: nox -s {session.name} -- {USAGE} (not understood: {' '.join(args[1:])})")
    try:
        return ModeArgs(str(parse_device_id(args[0] if args else "0")), repeat, workload, threads, train)
    except LabError as err:
        session.error(f"Usage: nox -s {session.name} -- {USAGE} ({err})")


def kernel_args(session: nox.Session) -> list[str]:
    """``--kernel cpp|pyasc`` for mode 02's run.sh (C++ by default); a bad value ends the session with one line."""
    args = list(session.posargs)
    if "--kernel" not in args:
        return []
    at = args.index("--kernel")
    kernel = args[at + 1] if at + 1 < len(args) else ""
    if kernel not in ("cpp", "pyasc"):
        session.error(f"Usage: nox -s {session.name} -- {USAGE} (--kernel takes cpp or pyasc, got {kernel!r})")
    return ["--kernel", kernel]


def check_workload(session: nox.Session, python: str, workload: str | None, train: bool) -> None:
    """Load the workload and run its model once, before the first mode of this invocation starts (what
    every mode would do first): a broken file ends this session with the one line that says why, and
    every later mode session of the invocation is skipped instead of saying it again."""
    key = f"{workload or ''}|{train}"
    skip_if_refused(session, key)
    if key in WORKLOAD_CHECKED:  # loaded and run already
        return
    command = [python, "-m", "common", "workload", *([workload] if workload else []), *(["--train"] if train else [])]
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))  # as run.sh: the user's kept
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": path})
    if done.returncode == 0:
        WORKLOAD_CHECKED[key] = None
        session.log(done.stdout.strip())
        return
    lines = [line for line in (done.stderr or done.stdout).strip().splitlines() if line.strip()]
    WORKLOAD_CHECKED[key] = lines[-1] if lines else f"the workload check exited with {done.returncode}"
    session.error(WORKLOAD_CHECKED[key].removeprefix("Error: "))


WORKLOAD_BUILD_SCRIPTS = {"03_api_pyAcl/build_model.sh"}  # the build steps that take --workload
THREADS_SCRIPTS = {"01_cmdline/run.sh", "03_api_pyAcl/run.sh", "04_pyTorch/run.sh"}  # the runs of the workload
MODE_DIRS = {"cmdline": "01_cmdline", "ascendc": "02_api_AscendC", "pyacl": "03_api_pyAcl", "pytorch": "04_pyTorch"}


def queue_agree(session: nox.Session) -> None:
    """Once the four mode sessions have all started in this invocation, passed or failed, queue ``agree``
    after the sessions still to run (it reports a failed mode as a FAIL, never leaves it out silently)."""
    if MODES_STARTED != set(MODE_DIRS):
        return
    try:
        session.notify("agree", posargs=[])  # a no-op when agree is queued already
        session.log("all four modes ran in this invocation: the cross-mode verdict follows")
    except ValueError:  # --parallel / --no-dependencies: nox queues nothing more
        session.log("all four modes ran in this invocation: `nox -s agree` gives the cross-mode verdict")


def run_mode(session: nox.Session, *scripts: list[str], run_args: list[str] = ()) -> None:
    """Run a mode's scripts with the shared environment's python: run.sh gets the device id, then
    ``--workload FILE`` when one was given (so does 03's build_model.sh, which builds the workload's
    model; 02's build.sh builds a kernel and takes no workload).

    With ``--repeat N`` the mode's run.sh runs N times and each run's prof_out/ is kept as
    ``<mode>/prof_runs/<i>/`` (for ``python -m common compare``, which takes medians over them).
    When the four mode sessions have all started in this invocation, ``agree`` is queued after the
    sessions still to run, without the device arguments, which are not agree's (queue_agree). nox's
    ``requires=`` cannot say "after these, if they all ran" (it runs a session's requirements
    *before* it, and ``nox -s agree`` alone must not re-run the modes).
    """
    args = mode_args(session)
    python = lab_python(session)
    check_workload(session, python, args.workload, args.train)
    MODES_STARTED.add(session.name)
    try:
        _run_scripts(session, python, scripts, args, list(run_args))
    finally:  # also when the mode failed: agree then reports it as a FAIL
        queue_agree(session)


def _run_scripts(session: nox.Session, python: str, scripts: tuple[list[str], ...], args: ModeArgs,
                 run_args: list[str] = ()) -> None:
    device, repeat, workload, threads, train = args
    env = {"PYTHON": python, "MSPROF_LAB_RUN_ID": RUN_ID}
    for script in scripts:
        if not script[-1].endswith("run.sh"):
            extra = workload_args(workload) if script[-1] in WORKLOAD_BUILD_SCRIPTS else []
            session.run("bash", *script, *extra, env=env, external=True)
            continue
        mode_dir = ROOT / Path(script[-1]).parts[0]
        try:
            runs = prepare_output_dir(mode_dir / "prof_runs") if repeat > 1 else None
        except LabError as err:
            session.error(str(err))
        for i in range(1, repeat + 1):
            if runs:
                session.log(f"run {i} of {repeat}")
            threads_args = ["--threads", str(threads)] if threads is not None and script[-1] in THREADS_SCRIPTS else []
            train_args = ["--train"] if train and script[-1] == "04_pyTorch/run.sh" else []
            session.run("bash", *script, device, *workload_args(workload), *threads_args, *train_args, *run_args,
                        env=env, external=True)
            if runs:
                shutil.copytree(mode_dir / "prof_out", runs / str(i))


@nox.session
def cmdline(session: nox.Session) -> None:
    """01: msprof wraps an unchanged program (black box)."""
    run_mode(session, ["01_cmdline/run.sh"])


@nox.session
def ascendc(session: nox.Session) -> None:
    """02: an AscendC kernel built, launched, verified and profiled (-- 0 --kernel pyasc: the pyasc one)."""
    run_mode(session, ["02_api_AscendC/build.sh"], ["02_api_AscendC/run.sh"], run_args=kernel_args(session))


@nox.session
def pyacl(session: nox.Session) -> None:
    """03: TinyMLP -> ONNX -> offline model -> pyACL inference, with the Cast lesson."""
    run_mode(session, ["03_api_pyAcl/build_model.sh"], ["03_api_pyAcl/run.sh"])


@nox.session
def pytorch(session: nox.Session) -> None:
    """04: torch_npu.profiler white-box, with a schedule and step_trace_time.csv."""
    run_mode(session, ["04_pyTorch/run.sh"])


@nox.session
def agree(session: nox.Session) -> None:
    """Cross-mode verdict: the four modes' prof_out/ side by side, checked against each other."""
    session.run(lab_python(session), "-m", "common", "agree", *session.posargs, external=True)


@nox.session
def sweep(session: nox.Session) -> None:
    """04 over a grid of sizes: where the workload turns from host-bound to compute-bound."""
    args = list(session.posargs)
    workload = take_workload(session, args, "[device] [--hidden ...] [--batch ...] [--threads N] [--workload FILE]")
    env = {"PYTHONPATH": str(ROOT), "MSPROF_LAB_RUN_ID": RUN_ID, "KINETO_LOG_LEVEL": "5"}
    session.run(lab_python(session), "-m", "common.modes.pytorch.sweep", *args, *workload_args(workload), env=env,
                external=True)


@nox.session
def precision(session: nox.Session) -> None:
    """Which op computes wrongly: every op of torch and 03's variants against the fp32 reference of the same op."""
    args = list(session.posargs)
    workload = take_workload(session, args, "[device] [--workload FILE] [--out DIR] [--torch-only]")
    session.run(lab_python(session), "-m", "common", "precision", *args, *workload_args(workload), external=True,
                env={"PYTHONPATH": str(ROOT)})


@nox.session
def ecosystem(session: nox.Session) -> None:
    """msprof-analyze, the Ascend toolkit's own analysis CLI, on 04's output and a real capture: same numbers."""
    args = list(session.posargs)
    workload = take_workload(session, args, "[--workload FILE] [--candidate DIR] [--baseline DIR] [--output DIR]")
    python = lab_python(session)
    if not any(a == "--candidate" or a.startswith("--candidate=") for a in args):
        # the default candidate is mode 04's output: make a fresh one first (of the workload, if one was given)
        session.run("bash", "04_pyTorch/run.sh", "0", *workload_args(workload),
                    env={"PYTHON": python, "MSPROF_LAB_RUN_ID": RUN_ID}, external=True)
    # msprof-analyze gets an environment of its own (.nox/ecosystem), built on first use by
    # common/collect/msprof_analyze.py with the same builder as the lab's (common/environments.py).
    session.run(python, "-m", "common.cli.ecosystem", *args, external=True)


DDP_USAGE = "[nproc 1..8] [--workload FILE]"


def ddp_args(session: nox.Session) -> tuple[str, str | None]:
    """``-- [nproc] [--workload FILE]`` (defaults 2 and $MSPROF_LAB_WORKLOAD or TinyMLP)."""
    args = list(session.posargs)
    workload = take_workload(session, args, DDP_USAGE)
    nproc = args[0] if args else "2"
    if len(args) > 1:
        session.error(f"Usage: nox -s ddp -- {DDP_USAGE} (not understood: {' '.join(args[1:])})")
    if not (nproc.isdigit() and 1 <= int(nproc) <= 8):
        session.error(f"Usage: nox -s ddp -- {DDP_USAGE} (nproc takes 1..8, got {nproc!r})")
    return nproc, workload


@nox.session
def ddp(session: nox.Session) -> None:
    """04 on N ranks (torchrun + DDP): per-rank profiles, the cluster view, the slow-rank demo."""
    nproc, workload = ddp_args(session)
    env = {"PYTHON": lab_python(session), "MSPROF_LAB_RUN_ID": RUN_ID}
    extra = workload_args(workload)
    # --cross-check: msprof-analyze cluster must agree with the lab's cluster view (installed once).
    session.run("bash", "04_pyTorch/run_ddp.sh", nproc, "--cross-check", *extra, env=env, external=True)
    if int(nproc) > 1:  # the slow-rank demo: the last rank gets 4x the work, the view must name it
        session.run("bash", "04_pyTorch/run_ddp.sh", nproc, "--slow-rank", str(int(nproc) - 1), "--cross-check",
                    "--output", "04_pyTorch/prof_out_ddp_slow", *extra, env=env, external=True)


@nox.session
def corpus(session: nox.Session) -> None:
    """Every model of tests/corpus through modes 01, 03, 04 and agree: correct ones pass, wrong_* ones fail (long)."""
    session.run(lab_python(session), "-m", "tests.corpus", *session.posargs, external=True,
                env={"PYTHONPATH": str(ROOT), "PYTHON": lab_python(session), "MSPROF_LAB_RUN_ID": RUN_ID})


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite (portable backend; pytest options after --, e.g. -m "not e2e" for the fast part)."""
    python = lab_python(session)
    # pandas too, as nox -s bench adds it: the benchmark's pandas baseline is tested like the others.
    session.run(python, "-m", "pip", "install", "--quiet", "--group", "bench", external=True)
    # One pytest, two workers (the 2-core VM): the modules that run modes in the checkout form one group and run one
    # test after the other on one worker; every other module is a group of its own beside them (tests/conftest.py).
    # `-- -n 0` runs it in one process.
    session.run(python, "-m", "pytest", "-n", "2", "--dist", "loadscope", *session.posargs, external=True,
                env={"MSPROF_LAB_RUN_ID": RUN_ID})


@nox.session(name="npu_dryrun")
def npu_dryrun(session: nox.Session) -> None:
    """Every mode's NPU path, end to end, against recording stand-ins of CANN, pyACL and torch_npu (tests/npu_dryrun)."""
    if len(session.posargs) > 1:
        session.error("Usage: nox -s npu_dryrun -- [device id 0..7]")
    device = session.posargs[0] if session.posargs else "0"
    session.run(lab_python(session), "-m", "tests.npu_dryrun", device, external=True, env={"PYTHONPATH": str(ROOT)})


@nox.session
def bench(session: nox.Session) -> None:
    """At real-model scale, side by side: 1M-row op_summary (lab, polars, pandas), 0.53 GB trace (lab, msgspec,
    msprof-analyze advisor), 1M-task db, 64 ranks (lab, msprof-analyze cluster); prints figures, asserts none.
    ``nox -s bench -- loop [device] [--cold]``: the card command instead, process by process (common/bench/loop.py)."""
    python = lab_python(session)
    loop = session.posargs[:1] == ["loop"]
    if not loop:  # pandas is only the baseline being compared against: its own group, added to the environment here
        session.run(python, "-m", "pip", "install", "--quiet", "--group", "bench", external=True)
    args = session.posargs if loop else ["run", *session.posargs]
    session.run(python, "-m", "common.bench", *args, external=True, env={"PYTHONPATH": str(ROOT)})
