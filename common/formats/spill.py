"""Float64 files in a temporary folder of the lab's own: where a cluster view's tables go past a size.

A table that grows with the rank count (every rank's step rows, each rank's start of each collective)
is kept in memory while it is small and moved here beyond :data:`SPILL_BYTES`, so that what the
view holds does not grow with the job. The folder is made on the first write and removed with the
object that owns it. A pickled folder arrives empty (a chunk read in a worker carries its values: its
owner's ``__getstate__`` puts them back in memory).
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from pathlib import Path

import numpy as np

SPILL_BYTES = 1 << 21  # 2 MiB of a table in memory at most; beyond, in files


class SpillFolder:
    """Named files of float64 values, appended to and read back by position."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._folder: Path | None = None

    def __getstate__(self) -> dict:
        return {"_prefix": self._prefix, "_folder": None}

    @property
    def used(self) -> bool:
        return self._folder is not None

    def append(self, name: str, values: np.ndarray) -> None:
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix=self._prefix))
            weakref.finalize(self, shutil.rmtree, self._folder, True)
        with (self._folder / f"{name}.f64").open("ab") as f:
            np.ascontiguousarray(values, dtype=np.float64).tofile(f)

    def read(self, name: str, first: int, count: int) -> np.ndarray:
        """``count`` values of ``name`` from the ``first``-th."""
        if count <= 0:
            return np.empty(0)
        return np.fromfile(self._folder / f"{name}.f64", dtype=np.float64, count=count, offset=8 * first)
