"""A CPU twin of the pyasc subset that ``add_pyasc.py`` uses, importable as ``asc`` when pyasc is not.

``site/`` holds the twin's ``asc`` package, which needs only numpy: the lab puts :data:`SITE` first on
the ``PYTHONPATH`` of ``add_pyasc.py`` when it runs the lesson as a program, and ``install()`` puts it
on this process's ``sys.path`` (for tests); both only when no real pyasc can be imported: a pyasc you
installed always wins, and the lab never shadows it.
The kernel file is the same either way; on the twin its ``@asc.jit`` function runs as Python on
the host, one block after another, with real fp16 arithmetic, strict checks and per-pipe timers
(see ``site/asc/_twin.py``).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SITE = Path(__file__).resolve().parent / "site"


def real_pyasc_available() -> bool:
    """True when an ``asc`` other than this twin can be imported."""
    if "asc" in sys.modules:
        return not is_twin(sys.modules["asc"])
    spec = importlib.util.find_spec("asc")
    return spec is not None and not str(spec.origin or "").startswith(str(SITE))


def install() -> ModuleType:
    """Make ``import asc`` give the twin (only when pyasc itself is missing) and return it."""
    if real_pyasc_available():
        raise RuntimeError("pyasc is installed: the twin must not shadow it")
    if str(SITE) not in sys.path:
        sys.path.insert(0, str(SITE))
    return importlib.import_module("asc")


def is_twin(module: ModuleType) -> bool:
    """Whether an imported ``asc`` is this twin."""
    return bool(getattr(module, "LAB_TWIN", False))
