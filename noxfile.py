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
    nox -s zoo                                   # torchvision, timm and transformers models, every mode and agree
    nox -s noise -- 10                           # the card command 10 times with one core busy: each check's margin

Every session hands its arguments unchanged to the lab's own command for it (mode sessions:
``python -m common.cli.sessions``, which knows which scripts take which option; the scripts
check the values), run from the directory nox was started in, so a relative ``--workload FILE``
(or ``MSPROF_LAB_WORKLOAD=FILE``) means what it says there (docs/own_model.md). Each mode
session requires the ``workload`` session: the file is loaded and its model run once, before the
first mode starts, and a broken one stops everything with one line (nox skips the modes, nothing
is written). After the modes of an invocation have run, passed or failed, ``agree`` follows by
itself: it compares them when all four ran. The backend is detected once, here, and printed before anything runs.
Every session uses one shared environment (``.nox/lab-<backend>``), built on first use and
rebuilt only when its dependency groups in ``pyproject.toml`` change (common/environments.py,
which also builds msprof-analyze's ``.nox/ecosystem``). On an NPU machine that environment
sees the system's torch, torch_npu and CANN's ``acl`` (system site packages; torch is not
reinstalled); on the portable backend it pins the CPU build of torch. A workload file that declares
``REQUIRES = [...]`` runs under an environment of its own for that set (``.nox/workload-<key>``,
common/collect/workload_env.py), built by the ``workload`` session, torch held at the lab's version.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from common.backend import detect  # noqa: E402  (standard library only)
from common.environments import compile_lab_code, ensure_environment  # noqa: E402
from common.errors import LabError  # noqa: E402

nox.needs_version = ">=2024.4"  # as in the dev group of pyproject.toml
nox.options.sessions = ["cmdline", "ascendc", "pyacl", "pytorch"]
nox.options.default_venv_backend = "none"  # sessions share the lab environment below instead

try:
    BACKEND = detect()
except LabError as err:  # e.g. MSPROF_LAB_BACKEND=npu on a machine without CANN
    sys.exit(f"Error: {err}")
print(BACKEND.banner(), flush=True)
# One id for every mode of this nox invocation, in each run_info.json: agree tells this run's outputs from older ones.
RUN_ID = os.environ.get("MSPROF_LAB_RUN_ID") or uuid.uuid4().hex
GROUPS = ["npu" if BACKEND.is_npu else "portable", "dev"]


def lab_python(session: nox.Session) -> str:
    """The shared environment's python, built (or rebuilt) when its dependency groups changed; the lab's own
    modules byte-compiled for it where stale (the environment is built from this interpreter)."""
    try:
        python = ensure_environment(
            ROOT / ".nox" / f"lab-{BACKEND.name}",
            GROUPS,
            system_site_packages=BACKEND.is_npu,
            log=session.log,
            capture=False,
        )  # pip prints to the terminal as it works
    except LabError as err:
        session.error(str(err))
    compile_lab_code(ROOT)
    return str(python)


def lab(session: nox.Session, python: str, *command: str) -> None:
    """Run one of the lab's commands with the shared environment's python, from the folder nox was started in (a
    relative ``--workload`` or ``--output`` means what it says there); the user's PYTHONPATH is kept, after the lab."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {"PYTHON": python, "PYTHONPATH": path, "MSPROF_LAB_RUN_ID": RUN_ID, "KINETO_LOG_LEVEL": "5"}
    with session.chdir(getattr(session, "invoked_from", None) or ROOT):
        session.run(python, *command, env=env, external=True)


def run_mode(session: nox.Session) -> None:
    """A mode session: common/cli/sessions.py runs the mode's scripts with the arguments they take. Once it has
    run, passed or failed, ``agree`` is queued after the sessions still to run; it compares the four modes when all
    four ran in this invocation and says which did not otherwise (``requires=`` cannot say "after these, if they
    all ran": it runs a session's requirements before it, and ``nox -s agree`` alone must not re-run the modes)."""
    python = lab_python(session)
    try:
        lab(session, python, "-m", "common.cli.sessions", session.name, *session.posargs)
    finally:
        try:
            session.notify("agree", posargs=["--run-id", RUN_ID])  # a no-op when agree is queued already
        except ValueError:  # --no-dependencies / a session list that leaves agree out: nox queues nothing more
            session.log("`nox -s agree` gives the cross-mode verdict")


@nox.session
def workload(session: nox.Session) -> None:
    """Load the workload (-- --workload FILE, else TinyMLP) and run its model once; every mode session requires it."""
    lab(session, lab_python(session), "-m", "common.cli.sessions", "workload", *session.posargs)


@nox.session(requires=["workload"])
def cmdline(session: nox.Session) -> None:
    """01: msprof wraps an unchanged program (black box)."""
    run_mode(session)


@nox.session(requires=["workload"])
def ascendc(session: nox.Session) -> None:
    """02: an AscendC kernel built, launched, verified and profiled (-- 0 --kernel pyasc: the pyasc one)."""
    run_mode(session)


@nox.session(requires=["workload"])
def pyacl(session: nox.Session) -> None:
    """03: TinyMLP -> ONNX -> offline model -> pyACL inference, with the Cast lesson."""
    run_mode(session)


@nox.session(requires=["workload"])
def pytorch(session: nox.Session) -> None:
    """04: torch_npu.profiler white-box, with a schedule and step_trace_time.csv."""
    run_mode(session)


@nox.session
def agree(session: nox.Session) -> None:
    """Cross-mode verdict: the four modes' prof_out/ side by side, checked against each other."""
    lab(session, lab_python(session), "-m", "common.cli.sessions", "agree", *session.posargs)


@nox.session
def sweep(session: nox.Session) -> None:
    """04 over a grid of sizes: where the workload turns from host-bound to compute-bound."""
    lab(session, lab_python(session), "-m", "common.modes.pytorch.sweep", *session.posargs)


@nox.session
def precision(session: nox.Session) -> None:
    """Which op computes wrongly: every op of torch and 03's variants against the fp32 reference of the same op."""
    lab(session, lab_python(session), "-m", "common", "precision", *session.posargs)


@nox.session
def ecosystem(session: nox.Session) -> None:
    """msprof-analyze, the Ascend toolkit's own analysis CLI, on 04's output and a real capture: same numbers."""
    # msprof-analyze gets an environment of its own (.nox/ecosystem), built on first use by
    # common/collect/msprof_analyze.py with the same builder as the lab's (common/environments.py).
    lab(session, lab_python(session), "-m", "common.cli.sessions", "ecosystem", *session.posargs)


@nox.session
def ddp(session: nox.Session) -> None:
    """04 on N ranks (torchrun + DDP): per-rank profiles, the cluster view, the slow-rank demo."""
    lab(session, lab_python(session), "-m", "common.cli.sessions", "ddp", *session.posargs)


@nox.session
def corpus(session: nox.Session) -> None:
    """Every model of tests/corpus through modes 01, 03, 04 and agree: correct ones pass, wrong_* ones fail (long)."""
    lab(session, lab_python(session), "-m", "tests.corpus", *session.posargs)


@nox.session
def zoo(session: nox.Session) -> None:
    """torchvision, timm and transformers models (tests/zoo, random weights) through every mode and agree (long)."""
    lab(session, lab_python(session), "-m", "tests.zoo", *session.posargs)


@nox.session(venv_backend="venv")
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check on every Python file, with pyproject.toml's settings; CI runs it first."""
    session.install("ruff==0.17.5")  # in an environment of its own, .nox/lint
    session.run("ruff", "check", "--no-cache", ".")
    session.run("ruff", "format", "--check", "--no-cache", ".")  # `ruff format .` lays a file out as this expects


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite (portable backend; pytest options after --, e.g. -m "not e2e" for the fast part)."""
    python = lab_python(session)
    # pandas too, as nox -s bench adds it: the benchmark's pandas baseline is tested like the others; and Dask, for
    # the cluster view's --scheduler path (tests/unit/test_cluster_dask.py).
    session.run(python, "-m", "pip", "install", "--quiet", "--group", "bench", "--group", "dask", external=True)
    # One pytest on two workers (the 2-core VM), each running the lab from a private copy (tests/conftest.py).
    # `-- -n 0` runs it in one process.
    session.run(
        python,
        "-m",
        "pytest",
        "-n",
        "2",
        "--dist",
        "loadscope",
        *session.posargs,
        external=True,
        env={"MSPROF_LAB_RUN_ID": RUN_ID},
    )


@nox.session(name="npu_dryrun")
def npu_dryrun(session: nox.Session) -> None:
    """Every mode's NPU path, end to end, against recording stand-ins of CANN, pyACL and torch_npu (tests/npu_dryrun)."""
    lab(session, lab_python(session), "-m", "tests.npu_dryrun", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """At real-model scale, side by side: 1M-row op_summary (lab, polars, pandas), 0.53 GB trace (lab, msgspec,
    msprof-analyze advisor), 1M-task db, 64 ranks (lab, msprof-analyze cluster); prints figures, asserts none.
    ``nox -s bench -- loop [device] [--cold]``: the card command instead, process by process (common/bench/loop.py);
    ``nox -s bench -- cluster``: the cluster view against msprof-analyze from 64 to 16,384 ranks, warm and cold."""
    python = lab_python(session)
    own = session.posargs[:1] in (["loop"], ["cluster"])  # a subcommand of its own, else `run`
    if not own:  # pandas is only the baseline being compared against: its own group, added to the environment here
        session.run(python, "-m", "pip", "install", "--quiet", "--group", "bench", external=True)
    args = session.posargs if own else ["run", *session.posargs]
    lab(session, python, "-m", "common.bench", *args)


@nox.session
def noise(session: nox.Session) -> None:
    """The card command N times with a hog on one core: -- N [--hog cpu|memory|none] [--workload FILE] [--workloads]."""
    lab(session, lab_python(session), "-m", "common.bench.noise", *session.posargs)


@nox.session
def fix(session: nox.Session) -> None:
    """Finding -> fix: baseline and fix interleaved, N runs each: -- [dev] [--repeat N] [--workload FILE] [--pairs ...]."""
    lab(session, lab_python(session), "-m", "common.modes.fix", *session.posargs)
