"""Mode 01's lesson file is a template: copied alone into a folder outside the lab, beside a model the lab has
never seen, it runs with nothing of the lab (issue "Lessons you can copy")."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT

LESSON = ROOT / "01_cmdline" / "src" / "model.py"
IMPORTS_THE_LAB = re.compile(r"^\s*(from|import)\s+common\b", re.MULTILINE)

# Not a model of the lab's: a Conv1d block with LayerNorm, SiLU and a residual, two outputs.
MODEL = """
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(6, 6, 3, padding=1)
        self.norm = nn.LayerNorm(20)
        self.head = nn.Linear(20, 4)

    def forward(self, x):
        h = x + nn.functional.silu(self.norm(self.conv(x)))
        return self.head(h), h.mean(dim=1)


def build_model():
    return Block()


def make_input():
    return torch.randn(2, 6, 20)
"""


def lesson_copy(tmp_path: Path) -> Path:
    """model.py alone in an empty folder outside the repository, with the user's model beside it."""
    folder = tmp_path / "my_project"
    folder.mkdir()
    shutil.copy2(LESSON, folder / "model.py")
    (folder / "my_model.py").write_text(MODEL)
    return folder


def run_copy(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing of the lab on the path
    return subprocess.run(
        [sys.executable, "model.py", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_lesson_file_imports_nothing_of_the_lab() -> None:
    """Its line budget: tests/unit/test_lessons.py, one rule for every lesson."""
    assert not IMPORTS_THE_LAB.search(LESSON.read_text())


def test_a_copy_runs_a_model_of_its_own_and_saves_every_output(tmp_path: Path) -> None:
    folder = lesson_copy(tmp_path)
    assert not (tmp_path / "common").exists()
    result = run_copy(folder, "--model", "my_model.py", "--save-output", "out.npy")
    assert result.returncode == 0, result.stderr
    assert re.search(r"model\.py: 20 forwards on cpu, [0-9.]+ ms each", result.stdout), result.stdout
    saved = np.load(folder / "out.npz")  # two outputs: one .npz, in order
    assert [saved[k].shape for k in saved.files] == [(2, 6, 4), (2, 20)]
    # The same seeds as the lab's workload contract: the output is the model's under seed 0, input under seed 1.
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location("my_model", folder / "my_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    model = module.build_model().eval()
    torch.manual_seed(1)
    with torch.no_grad():
        expected = model(module.make_input())
    np.testing.assert_allclose(saved["arr_0"], expected[0].numpy(), rtol=1e-5, atol=1e-6)


def test_a_copy_runs_tinymlp_without_a_model(tmp_path: Path) -> None:
    folder = lesson_copy(tmp_path)
    result = run_copy(folder, "--save-output", "out.npy")
    assert result.returncode == 0, result.stderr
    assert np.load(folder / "out.npy").shape == (32, 1024)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "missing.py"], "--model missing.py: no such file"),
        (["--device", "gpu"], "--device 'gpu' is not cpu, npu or npu:<logical device id>"),
    ],
)
def test_a_copy_refuses_bad_arguments_in_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    result = run_copy(lesson_copy(tmp_path), *args)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr
