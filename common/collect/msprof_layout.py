"""The msprof on-disk layout, shared by every portable collector that imitates msprof.

``PROF_{6 digits}_{17-digit ts}_{16 upper-case chars}/mindstudio_profiler_output/<name>_{14-digit ts}.csv``
"""

from __future__ import annotations

import datetime as dt
import secrets
import string
from dataclasses import dataclass
from pathlib import Path

OUTPUT_SUBDIR = "mindstudio_profiler_output"


@dataclass(frozen=True)
class ProfDir:
    root: Path  # PROF_*/
    output: Path  # PROF_*/mindstudio_profiler_output/
    ts: str  # the 14-digit stamp every exported file of this run carries

    def file(self, name: str, ext: str = "csv") -> Path:
        """e.g. ``file("op_summary")`` -> ``.../op_summary_20260101120000.csv``."""
        return self.output / f"{name}_{self.ts}.{ext}"


def new_prof_dir(parent: Path, index: int = 1, when: dt.datetime | None = None) -> ProfDir:
    """Create a fresh ``PROF_*`` folder with msprof's naming under ``parent``."""
    when = when or dt.datetime.now()
    stamp17 = when.strftime("%Y%m%d%H%M%S") + f"{when.microsecond // 1000:03d}"
    suffix = "".join(secrets.choice(string.ascii_uppercase + string.digits) for _ in range(16))
    root = parent / f"PROF_{index:06d}_{stamp17}_{suffix}"
    output = root / OUTPUT_SUBDIR
    output.mkdir(parents=True)
    return ProfDir(root, output, when.strftime("%Y%m%d%H%M%S"))
