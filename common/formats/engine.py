"""The columnar engine (polars, numpy) and the JSON decoder (msgspec) the readers use, or one clear error.

Both come with the lab's dependency group; a Python without them (say, one used to read a
profile collected outside the lab) gets an ``Error:`` line saying what to install.
"""

from __future__ import annotations

from common.errors import LabError

try:
    import msgspec
    import numpy as np
    import polars as pl
except ImportError as err:
    raise LabError(
        f"{err.name} is not installed: the profile readers need numpy, polars and msgspec",
        "from the repository root: python -m pip install --group lab (or: python -m pip install numpy polars msgspec)",
    ) from None

__all__ = ["msgspec", "np", "pl"]
