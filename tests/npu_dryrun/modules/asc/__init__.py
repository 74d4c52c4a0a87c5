# TEST DOUBLE for the NPU dry run: pyasc as add_pyasc.py imports it; never used outside tests.
"""The ``asc`` stand-in: the lab's pyasc twin (``$NPU_DRYRUN_PYASC_TWIN``) does the arithmetic, and every
launch is recorded as pyasc reports it to msprof (``pyasc`` / ``launch``: kernel name, block count,
device), so the ``msprof op`` and ``msprof op simulator`` stand-ins collect it. ``asc.runtime.config``
is this stand-in's own: it accepts ``Backend.NPU`` (a logical device) and ``Backend.Model`` (a SoC)."""

import os
from pathlib import Path

import npu_dryrun_record as rec

_TWIN = Path(os.environ["NPU_DRYRUN_PYASC_TWIN"])
__path__.append(str(_TWIN))  # noqa: F821  (asc._twin and asc.lib come from the twin; asc.runtime is ours)
exec(compile((_TWIN / "__init__.py").read_text(encoding="utf-8"), str(_TWIN / "__init__.py"), "exec"))

_twin_launch = Kernel._launch  # noqa: F821  (defined by the twin's __init__)


def _recorded_launch(self, core_num: int, *args) -> None:
    from asc.runtime import config

    _twin_launch(self, core_num, *args)
    rec.record(
        "pyasc",
        "launch",
        [self.__name__, core_num, config.SELECTED["device_id"]],
        rc=0,
        backend=config.SELECTED["backend"],
        soc_version=config.SELECTED["soc_version"],
    )


Kernel._launch = _recorded_launch  # noqa: F821
