"""The environment of a workload file's ``REQUIRES`` (common/workload/requires.py): the lab's backend group and
those packages, torch held at the version of the lab's own environment.

It is ``.nox/workload-<key>``, keyed by the set, built once by the lab's builder (common/environments.py:
rebuilt only when the set, the group or the Python changes) and never touched by a rebuild of the lab's
environment. torch is pinned exactly (``torch===<the lab's torch>``), so a package that asks for another
torch stops the build with pip's conflict line. After the install every package of the set is imported:
a compiled package from the registry (torchvision) is built against the registry's torch, and on the lab's
CPU-only build (``2.13.0+cpu``) its import fails (``operator torchvision::nms does not exist``). The
environment then takes the registry's build of the same version instead and says so in one line. On the
NPU backend, where torch is the system's and torch_npu is built against it, it never does: the build
stops with the failed import.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from common.backend import detect
from common.environments import ensure_environment, is_built
from common.errors import LabError
from common.workload.requires import declared, environment_dir

IMPORT_TIMEOUT_S = 300  # importing every package of a set once (transformers, timm: seconds on one core)
# Run by the new environment's python: import the top-level modules of each distribution named; print the
# first that fails as "<distribution>\t<module>\t<error>" and exit 1.
IMPORT_CHECK = r"""
import importlib, importlib.metadata as md, re, sys
NOT_CODE = {"test", "tests", "docs", "doc", "examples", "benchmarks"}
for req in sys.argv[1:]:
    name = re.match(r"[A-Za-z0-9._-]+", req).group(0)
    dist = md.distribution(name)
    tops = (dist.read_text("top_level.txt") or "").split() or sorted(
        {f.parts[0].removesuffix(".py") for f in dist.files or ()
         if (len(f.parts) == 2 and f.parts[1] == "__init__.py") or (len(f.parts) == 1 and f.suffix == ".py")})
    for top in (t for t in tops if not t.startswith("_") and t not in NOT_CODE):
        try:
            importlib.import_module(top)
        except Exception as err:
            said = (str(err).strip().splitlines() or [""])[0]
            print(f"{name}\t{top}\t{type(err).__name__}: {said}")
            sys.exit(1)
"""


class ImportFailed(LabError):
    """A package of the set installed but does not import in the new environment."""

    def __init__(self, package: str, module: str, error: str, venv: Path) -> None:
        self.package, self.error = package, error
        super().__init__(
            f"{venv}: `import {module}` ({package}) fails after its install: {error}",
            "check the versions in REQUIRES: each must work with the lab's torch",
        )


def lab_torch() -> str:
    """The version of torch in this Python, the lab's (``2.13.0+cpu`` on the portable backend)."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        raise LabError(
            "this Python has no torch, so a workload environment cannot hold torch at the lab's version",
            "run it with the lab's environment (nox builds it: nox -s workload)",
        ) from None


def import_check(requirements: tuple[str, ...]) -> Callable[[Path], None]:
    """``verify`` for ensure_environment: every package of ``requirements`` imports in the new environment."""

    def verify(python: Path) -> None:
        try:
            proc = subprocess.run(
                [str(python), "-c", IMPORT_CHECK, *requirements],
                capture_output=True,
                text=True,
                timeout=IMPORT_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise LabError(
                f"importing {', '.join(requirements)} in {python.parents[1]} took over {IMPORT_TIMEOUT_S} s",
                "check those packages",
            ) from None
        if proc.returncode != 0:
            fields = proc.stdout.strip().split("\t")
            if len(fields) != 3:
                said = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                raise LabError(
                    f"{python.parents[1]}: checking its packages' imports failed: {said}",
                    "check the versions in REQUIRES",
                )
            raise ImportFailed(*fields, python.parents[1])

    return verify


def ensure(file: Path, *, log: Callable[[str], object] = print, capture: bool = True) -> Path | None:
    """The python of the environment of ``file``'s REQUIRES, built when stale; None when it declares none."""
    requirements = declared(file)
    if not requirements:
        return None
    venv = environment_dir(requirements)
    backend = detect()
    groups = ["npu" if backend.is_npu else "portable"]
    torch = lab_torch()
    public = torch.split("+")[0]
    # The lab's torch first; the registry's build of the same version only where the lab's is a local build and
    # the lab's torch is its own (portable). A stamp of either means built, and which one was taken.
    builds = [torch, public] if public != torch and not backend.is_npu else [torch]
    pinned = [(*requirements, f"torch==={build}") for build in builds]
    options = {
        "system_site_packages": backend.is_npu,
        "log": log,
        "capture": capture,
        "fix": f"check the network and REQUIRES in {file}",
    }
    for one in pinned:
        if is_built(venv, groups, system_site_packages=backend.is_npu, requirements=one):
            return venv / "bin" / "python"
    try:
        return ensure_environment(venv, groups, requirements=pinned[0], verify=import_check(requirements), **options)
    except ImportFailed as err:
        if len(builds) == 1:
            raise
        log(
            f"{err.package} does not import with the lab's torch {torch} ({err.error}): it is built against the "
            f"registry's torch {public}, so {venv.name} takes that build (it brings its own libraries, several GB "
            f"with CUDA's) and keeps the lab's {torch} untouched in .nox/lab-*"
        )
        # Installed over the first build: pip swaps torch (and adds what the registry's build needs), the rest stays.
        return ensure_environment(
            venv, groups, requirements=pinned[1], verify=import_check(requirements), keep=True, **options
        )
