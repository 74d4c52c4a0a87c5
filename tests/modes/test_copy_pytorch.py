"""Mode 04's lesson files copied alone into an empty folder outside the repository, beside a model the lab has
never seen (Conv1d + LayerNorm + SiLU with a residual): they run with the lab environment's Python, the profiler
writes its files, and nothing of the lab is imported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT

from common.modes import pytorch as harness

SRC = ROOT / "04_pyTorch" / "src"
LESSONS = ("model_with_profiler.py", "dynamic_profile.py")
MODEL = """import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.norm = nn.Conv1d(8, 8, 3, padding=1), nn.LayerNorm(16)

    def forward(self, x):
        return x + nn.functional.silu(self.norm(self.conv(x)))


def build_model():
    return Block()


def make_input():
    return torch.randn(4, 8, 16)


def loss(output, x):
    return (output - x).square().mean()
"""


def _copy(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / "my_project"
    folder.mkdir()
    shutil.copy2(SRC / name, folder / name)
    (folder / "my_model.py").write_text(MODEL)
    assert not folder.resolve().is_relative_to(ROOT)
    return folder


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MSPROF_LAB_BACKEND", "PROF_CONFIG_PATH")}
    return {**env, "KINETO_LOG_LEVEL": "5", **extra}


def test_the_lesson_keeps_the_schedule_the_lab_reads() -> None:
    text = (SRC / "model_with_profiler.py").read_text()
    assert f"WAIT, WARMUP, ACTIVE = {harness.WAIT}, {harness.WARMUP}, {harness.ACTIVE}" in text


@pytest.mark.parametrize("train", [False, True], ids=["inference", "training"])
def test_model_with_profiler_runs_from_a_copy(tmp_path: Path, train: bool) -> None:
    folder = _copy(tmp_path, "model_with_profiler.py")
    argv = [
        sys.executable,
        "model_with_profiler.py",
        "--model",
        "my_model.py",
        "--out",
        "prof_out",
        "--save-output",
        "out.npy",
        *(["--train"] if train else []),
    ]
    proc = subprocess.run(argv, cwd=folder, env=_env(), capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    (trace,) = (folder / "prof_out").glob("*.pt.trace.json")
    steps = {e["name"] for e in json.loads(trace.read_text())["traceEvents"] if e.get("name", "").startswith("Prof")}
    assert steps == {f"ProfilerStep#{n}" for n in range(4, 9)}  # wait 1 + warm-up 3, then 5 recorded
    import numpy as np

    saved = np.load(folder / "out.npy")
    assert saved.shape == ((9,) if train else (4, 8, 16))


def test_model_with_profiler_refuses_a_missing_model_in_one_line(tmp_path: Path) -> None:
    folder = _copy(tmp_path, "model_with_profiler.py")
    proc = subprocess.run(
        [sys.executable, "model_with_profiler.py", "--model", "nope.py", "--out", "p"],
        cwd=folder,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "nope.py: no such file" in proc.stderr


def test_dynamic_profile_runs_from_a_copy_and_collects_on_request(tmp_path: Path) -> None:
    folder = _copy(tmp_path, "dynamic_profile.py")
    config = folder / "prof_cfg"
    job = subprocess.Popen(
        [sys.executable, "dynamic_profile.py", "--model", "my_model.py", "--steps", "100000"],
        cwd=folder,
        env=_env(PROF_CONFIG_PATH=str(config)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (config / "profiler_config.json").is_file() and time.monotonic() < deadline and job.poll() is None:
            time.sleep(0.1)
        template = json.loads((config / "profiler_config.json").read_text())
        edited = {
            **template,
            "start_step": -1,
            "warmup": 1,
            "active": 3,
            "record_shapes": True,
            "prof_dir": str(folder / "prof_out"),
        }
        (config / "edit.tmp").write_text(json.dumps(edited))
        os.replace(config / "edit.tmp", config / "profiler_config.json")  # a new file in one move, as an editor saves
        while not list((folder / "prof_out").glob("*.pt.trace.json")) and time.monotonic() < deadline:
            time.sleep(0.1)
        (config / "stop_job").touch()
        assert job.wait(timeout=60) == 0, job.stderr.read()
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    (trace,) = (folder / "prof_out").glob("*.pt.trace.json")
    events = json.loads(trace.read_text())["traceEvents"]
    assert len({e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#")}) == 3  # active 3


BATCHED_MODEL = """import os

import torch
from torch import nn


def build_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 64), nn.LayerNorm(64))


def make_input():
    return torch.randn(int(os.environ["BATCH"]), 64, generator=torch.Generator().manual_seed(2))
"""


def _tiled_median_us(trace: Path) -> float:
    """A plain parse of a torch.profiler trace: each ProfilerStep from its start to the next one's (the last: its
    own length), the median."""
    import statistics

    steps = sorted(
        (
            e
            for e in json.loads(trace.read_text())["traceEvents"]
            if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")
        ),
        key=lambda e: e["ts"],
    )
    return statistics.median([b["ts"] - a["ts"] for a, b in zip(steps, steps[1:])] + [steps[-1]["dur"]])


def test_compare_judges_two_batches_of_a_copied_lessons_traces_per_sample(tmp_path: Path) -> None:
    """The copied lesson writes a torch.profiler trace, nothing else: compare reads it as it is, with the batch
    of each side given (--samples), and compares the step time per sample, never refusing the changed shapes."""
    folder = _copy(tmp_path, "model_with_profiler.py")
    (folder / "batched.py").write_text(BATCHED_MODEL)
    for batch in ("1", "32"):
        proc = subprocess.run(
            [sys.executable, "model_with_profiler.py", "--model", "batched.py", "--out", f"b{batch}"],
            cwd=folder,
            env=_env(BATCH=batch),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "common",
            "compare",
            str(folder / "b1"),
            str(folder / "b32"),
            "--samples",
            "1",
            "32",
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode in (0, 1), proc.stderr  # a verdict, never a refusal
    doc = json.loads(proc.stdout)
    b1, b32 = (_tiled_median_us(next((folder / f"b{n}").glob("*.pt.trace.json"))) for n in (1, 32))
    steps = doc["steps"]
    assert steps["metric"] == "step time per sample" and doc["matched_by"] == "family"
    # the same spans; the lab works in absolute µs (~1.8e15 since the epoch), whose float64 spacing is 0.25 µs
    assert steps["baseline"]["Step"]["median"] == pytest.approx(b1, abs=0.5)
    assert steps["candidate"]["Step"]["median"] == pytest.approx(b32, abs=0.5)
    assert steps["per_sample_ratio"] == pytest.approx((b32 / 32) / b1, rel=0.5 / b1 + 0.5 / b32)
    assert {k["op_type"] for k in doc["added"]} == {"aten::addmm", "aten::gelu", "aten::native_layer_norm"}
