"""Outputs a lesson saves one file each (03's infer.py: output.npy, output_1.npy ...) read back in order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from common.errors import LabError
from common.formats.outputs import load_numbered_outputs, read_numbered_outputs


def _save(folder: Path, count: int) -> Path:
    first = folder / "output.npy"
    np.save(first, np.array([0.0]))
    for i in range(1, count):
        np.save(folder / f"output_{i}.npy", np.array([float(i)]))
    return first


def test_outputs_come_back_in_the_lessons_order_past_ten(tmp_path: Path) -> None:
    first = _save(tmp_path, 12)  # output_10 sorts before output_2 by name: the order is the index's
    assert [float(a[0]) for a in load_numbered_outputs(first)] == [float(i) for i in range(12)]
    assert [float(a[0]) for a in read_numbered_outputs(first, 12, "the lesson")] == [float(i) for i in range(12)]
    assert load_numbered_outputs(tmp_path / "none.npy") == []


def test_a_missing_output_is_named_with_who_should_have_saved_it(tmp_path: Path) -> None:
    first = _save(tmp_path, 2)
    with pytest.raises(LabError, match="the lesson infer.py saved no output_2.npy"):
        read_numbered_outputs(first, 3, "the lesson infer.py")
