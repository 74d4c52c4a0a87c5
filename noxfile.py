"""msprof lab: the learning path as nox sessions.

    nox -s cmdline ascendc pyacl pytorch -- 0    # every mode on device 0 (the default)
    nox -s tests                                 # the test suite

The backend is detected once, here, and printed before anything runs. Every session uses
one shared environment (``.nox/lab-<backend>``), built on first use and rebuilt only when
``pyproject.toml`` changes. On an NPU machine that environment sees the system's torch,
torch_npu and CANN's ``acl`` (system site packages; torch is not reinstalled); on the
portable backend it pins the CPU build of torch.
"""

from __future__ import annotations

import hashlib
import os
import sys
import uuid
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from common.env import detect, parse_device_id  # noqa: E402  (standard library only)
from common.errors import LabError  # noqa: E402

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
    """The shared environment's python, created or refreshed when pyproject.toml changed."""
    venv = ROOT / ".nox" / f"lab-{BACKEND.name}"
    python = venv / "bin" / "python"
    stamp = venv / ".lab-stamp"
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + " ".join(GROUPS).encode()).hexdigest()
    if python.exists() and stamp.is_file() and stamp.read_text() == want:
        return str(python)
    session.log(f"building the shared environment {venv} (once; torch takes a minute)")
    venv_args = ["--system-site-packages"] if BACKEND.is_npu else []
    session.run(sys.executable, "-m", "venv", "--clear", *venv_args, str(venv), external=True)
    session.run(str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip>=25.1", external=True)  # --group
    groups = [arg for group in GROUPS for arg in ("--group", group)]
    session.run(str(python), "-m", "pip", "install", "--quiet", *groups, external=True)
    stamp.write_text(want)
    return str(python)


def device_arg(session: nox.Session) -> str:
    """The device id from ``-- <id>`` (default 0), validated before anything runs."""
    if len(session.posargs) > 1:
        session.error(f"Usage: nox -s {session.name} -- [device id 0..63]")
    try:
        return str(parse_device_id(session.posargs[0] if session.posargs else "0"))
    except LabError as err:
        session.error(f"Usage: nox -s {session.name} -- [device id 0..63] ({err})")


def run_mode(session: nox.Session, *scripts: list[str]) -> None:
    """Run a mode's scripts with the shared environment's python; the device id goes last."""
    device = device_arg(session)
    env = {"PYTHON": lab_python(session), "MSPROF_LAB_RUN_ID": RUN_ID}
    for script in scripts:
        args = [*script, device] if script[-1].endswith("run.sh") else script
        session.run("bash", *args, env=env, external=True)


@nox.session
def cmdline(session: nox.Session) -> None:
    """01: msprof wraps an unchanged program (black box)."""
    run_mode(session, ["01_cmdline/run.sh"])


@nox.session
def ascendc(session: nox.Session) -> None:
    """02: an AscendC kernel built, launched, verified and profiled."""
    run_mode(session, ["02_api_AscendC/build.sh"], ["02_api_AscendC/run.sh"])


@nox.session
def pyacl(session: nox.Session) -> None:
    """03: TinyMLP -> ONNX -> offline model -> pyACL inference, with the Cast lesson."""
    run_mode(session, ["03_api_pyAcl/build_model.sh"], ["03_api_pyAcl/run.sh"])


@nox.session
def pytorch(session: nox.Session) -> None:
    """04: torch_npu.profiler white-box, with a schedule and step_trace_time.csv."""
    run_mode(session, ["04_pyTorch/run.sh"])


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite (portable backend; pass pytest options after --)."""
    python = lab_python(session)
    session.run(python, "-m", "pytest", *session.posargs, external=True, env={"MSPROF_LAB_RUN_ID": RUN_ID})
