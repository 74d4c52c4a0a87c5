# TEST DOUBLE for the NPU dry run: builds the fake CANN tree the stand-ins live in; never used outside tests.
"""A CANN install as the lab looks for it: ``bin/`` (msprof, atc, npu-smi, plus the cmake the NPU
build of mode 02 runs), ``set_env.sh``, ``version.cfg``, ``ascend_toolkit_install.info``,
``compiler/tikcpp/ascendc_kernel_cmake/ascendc.cmake``, ``tools/operator_cmp/compare/msaccucmp.py`` and
``python/site-packages``.

Every ``bin/`` entry is a two-line shell shim into tests/npu_dryrun/tools.py, run with the
interpreter given here (the lab environment's, which has numpy, onnx and onnxruntime).
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
TOOLS = ("msprof", "atc", "npu-smi", "cmake")
CANN_VERSION = "8.5.0"


HELPERS = ("npu_dryrun_record.py", "npu_dryrun_replay.py")


def install_modules(modules: Path, target: Path, names: tuple[str, ...]) -> Path:
    """Copy stand-in modules (and the helpers they import) into ``target``: where the real ones live."""
    target.mkdir(parents=True, exist_ok=True)
    for name in (*names, *HELPERS):
        src = modules / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, target / name)
    return target


def build(root: Path, python: str, modules: Path) -> Path:
    """Create the tree under ``root`` (which must not exist yet) and return it.

    pyACL goes where CANN installs it, ``python/site-packages/acl``; set_env.sh puts that folder on PYTHONPATH.
    """
    (root / "bin").mkdir(parents=True)
    for tool in TOOLS:
        shim = root / "bin" / tool
        shim.write_text(
            "#!/bin/sh\n# TEST DOUBLE (NPU dry run): the stand-in " + tool + ", never used outside tests.\n"
            f'exec {shlex.quote(python)} {shlex.quote(str(HERE / "tools.py"))} {tool} "$@"\n'
        )
        shim.chmod(0o755)
    kernel_cmake = root / "compiler" / "tikcpp" / "ascendc_kernel_cmake"
    kernel_cmake.mkdir(parents=True)
    (kernel_cmake / "ascendc.cmake").write_text(
        "# TEST DOUBLE (NPU dry run): never included; the stand-in cmake builds the host program itself.\n"
    )
    for folder in ("include", "x86_64-linux/lib64", "aarch64-linux/lib64"):
        (root / folder).mkdir(parents=True)
    compare = root / "tools" / "operator_cmp" / "compare"  # where CANN keeps msaccucmp.py (MSACCUCMP-CONVERT)
    compare.mkdir(parents=True)
    (compare / "msaccucmp.py").write_text(
        "# TEST DOUBLE (NPU dry run): the stand-in msaccucmp.py, never used outside tests.\n"
        "import runpy, sys\n"
        f"sys.argv = [{str(HERE / 'tools.py')!r}, 'msaccucmp', *sys.argv[1:]]\n"
        f"runpy.run_path({str(HERE / 'tools.py')!r}, run_name='__main__')\n"
    )
    install_modules(modules, root / "python" / "site-packages", ("acl",))
    (root / "version.cfg").write_text(f"# TEST DOUBLE (NPU dry run)\nversion={CANN_VERSION}\n")
    (root / "ascend_toolkit_install.info").write_text(
        f"package_name=Ascend-cann-toolkit\nversion={CANN_VERSION}\ninnerversion=V100R001C25\narch=x86_64\n"
    )
    (root / "set_env.sh").write_text(
        "# TEST DOUBLE (NPU dry run): what CANN's set_env.sh exports, for this fake tree; never used outside tests.\n"
        f"export ASCEND_HOME_PATH={shlex.quote(str(root))}\n"
        f"export ASCEND_TOOLKIT_HOME={shlex.quote(str(root))}\n"
        f"export PATH={shlex.quote(str(root / 'bin'))}:$PATH\n"
        f"export PYTHONPATH={shlex.quote(str(root / 'python/site-packages'))}:$PYTHONPATH\n"
    )
    return root


def environment(base: dict[str, str], root: Path, torch_site: Path) -> dict[str, str]:
    """``base`` as CANN's set_env.sh leaves it for this tree (PATH, PYTHONPATH, ASCEND_* homes), with the
    folder holding the torch_npu stand-in (a pip package, not part of CANN) on PYTHONPATH as well."""
    env = dict(base)
    env.update(
        ASCEND_HOME_PATH=str(root),
        ASCEND_TOOLKIT_HOME=str(root),
        NPU_DRYRUN_BIN=str(root / "bin"),
        PATH=f"{root / 'bin'}:{base.get('PATH', '/usr/bin:/bin')}",
        PYTHONPATH=":".join(
            filter(None, [str(torch_site), str(root / "python/site-packages"), base.get("PYTHONPATH")])
        ),
    )
    return env
