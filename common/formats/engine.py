"""The columnar engine (polars, numpy) and the JSON decoder (msgspec) the readers use, or one clear error.

All three come with the lab's dependency group; a Python without them (say, one used to read a
profile collected outside the lab) gets an ``Error:`` line saying what to install. numpy is
imported on its first use (``np`` stands in for the module until then): reading op_summary CSVs
never needs it, so a CSV report does not pay for its import (0.04 s on the benchmark's VM).
"""

from __future__ import annotations

import importlib.util

from common.errors import LabError

_INSTALL = "from the repository root: python -m pip install --group lab (or: python -m pip install numpy polars msgspec)"

try:
    import msgspec
    import polars as pl
except ImportError as err:
    raise LabError(f"{err.name} is not installed: the profile readers need numpy, polars and msgspec", _INSTALL) from None
if importlib.util.find_spec("numpy") is None:
    raise LabError("numpy is not installed: the profile readers need numpy, polars and msgspec", _INSTALL)


class _Numpy:
    """The numpy module, imported when one of its names is first looked up; each name is kept once found."""

    def __getattr__(self, name: str):
        import numpy

        value = getattr(numpy, name)
        setattr(self, name, value)
        return value


np = _Numpy()

__all__ = ["msgspec", "np", "pl"]
