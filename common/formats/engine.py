"""The columnar engine (polars, numpy) and the JSON decoder (msgspec) the readers use, or one clear error.

All three come with the lab's dependency group; a Python without them (say, one used to read a
profile collected outside the lab) gets an ``Error:`` line saying what to install. Each is
imported on its first use (``np``, ``pl`` and ``msgspec`` stand in for the modules until then):
reading op_summary CSVs never needs numpy, and a process that reads no profile (a build step, a
workload check) never pays for polars (about 0.6 s on the 2-core VM).
"""

from __future__ import annotations

import importlib.util

from common.errors import LabError

_INSTALL = (
    "use the lab's environment (.nox/lab-portable/bin/python, built by the card command), or install them: "
    "python -m pip install numpy polars msgspec"
)

for _name in ("msgspec", "polars", "numpy"):
    if importlib.util.find_spec(_name) is None:
        raise LabError(f"{_name} is not installed: the profile readers need numpy, polars and msgspec", _INSTALL)


class _Lazy:
    """A module imported when one of its names is first looked up; each name is kept once found."""

    def __init__(self, module: str) -> None:
        self._module = module

    def __getattr__(self, name: str):
        value = getattr(importlib.import_module(self._module), name)
        setattr(self, name, value)
        return value


np, pl, msgspec = _Lazy("numpy"), _Lazy("polars"), _Lazy("msgspec")

__all__ = ["msgspec", "np", "pl"]
