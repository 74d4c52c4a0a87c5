"""A model output saved by a mode: ``output.npy`` (one tensor) or, beside it, ``output.npz`` (several, in order)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from common.errors import LabError
from common.formats.engine import np
from common.workload import flatten_output

if TYPE_CHECKING:
    import numpy


@dataclass(frozen=True)
class SavedOutput:
    """A saved model output as read: its path (``output.npy``) and its arrays, None when not written."""

    path: Path
    arrays: list[numpy.ndarray] | None


def load_output(path: Path) -> list[numpy.ndarray] | None:
    """A saved model output: ``output.npy`` (one tensor) or, beside it, ``output.npz`` (several, in order)."""
    several = Path(path).with_suffix(".npz")
    if Path(path).is_file():
        return [np.load(path)]
    if several.is_file():
        with np.load(several) as data:
            return [data[f"arr_{i}"] for i in range(len(data.files))]
    return None


def read_output(path: Path) -> SavedOutput:
    """The output saved at ``path`` (or the ``.npz`` beside it), for common.analyze.checks.check_output_file."""
    return SavedOutput(Path(path), load_output(path))


def save_output(path: Path, output) -> Path:
    """A model output as :func:`load_output` reads it: one tensor -> ``path`` (.npy), several -> ``.npz``."""
    arrays = [t.detach().float().cpu().numpy() for t in flatten_output(output)]
    if len(arrays) == 1:
        np.save(path, arrays[0])
        return Path(path)
    np.savez(Path(path).with_suffix(".npz"), *arrays)
    return Path(path).with_suffix(".npz")


def numbered_output_path(output_npy: Path, i: int) -> Path:
    """Where a program that saves each output as its own file puts output ``i`` (03's infer.py): output.npy, then
    output_1.npy, output_2.npy ..."""
    return output_npy if i == 0 else output_npy.with_name(f"{output_npy.stem}_{i}.npy")


def read_numbered_outputs(output_npy: Path, count: int, writer: str) -> list[numpy.ndarray]:
    """The ``count`` outputs saved as :func:`numbered_output_path` names them; one error line naming those
    ``writer`` did not save."""
    paths = [numbered_output_path(output_npy, i) for i in range(count)]
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise LabError(f"{writer} saved no {', '.join(missing)} in {output_npy.parent}", "read its messages above")
    return [np.load(p) for p in paths]


def load_numbered_outputs(output_npy: Path) -> list[numpy.ndarray]:
    """Every output saved as :func:`numbered_output_path` names them, as many as there are (output.npy, then
    output_1.npy ... up to the first missing one); none when output.npy is missing."""
    arrays: list[numpy.ndarray] = []
    while (path := numbered_output_path(output_npy, len(arrays))).is_file():
        arrays.append(np.load(path))
    return arrays
