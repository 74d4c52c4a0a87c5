"""Mode 04's DDP lesson as a user takes it: ``ddp_with_profiler.py`` copied alone into an empty folder
outside the repository, beside a model the lab has never seen, started with
``python -m torch.distributed.run --nproc-per-node 2 ddp_with_profiler.py --model my_model.py --out prof``
(gloo between two CPU processes): exit 0, and every rank's torch.profiler trace in ``prof/``."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, run

LESSON = ROOT / "04_pyTorch" / "src" / "ddp_with_profiler.py"

# Conv1d + LayerNorm + SiLU with a residual, and its own loss: nothing the lab ships.
CONV_MODEL = """
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(8, 8, 3, padding=1)
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(x + nn.functional.silu(self.norm(self.conv(x))))


def build_model():
    return Block()


def make_input():
    return torch.randn(6, 8, 16)


def loss(output, x):
    return (output - x[:, :4, :4].mean()).pow(2).mean()
"""

# A GRU that returns a tuple (output, hidden state), no loss(): the lesson's mean square of both.
GRU_MODEL = """
import torch


def build_model():
    return torch.nn.GRU(12, 16, batch_first=True)


def make_input():
    return torch.randn(4, 5, 12)
"""


def launch(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """The copied lesson under torchrun, with the lab's Python and nothing of the lab on its path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(GLOO_SOCKET_IFNAME="lo", KINETO_LOG_LEVEL="5")  # gloo on loopback: nothing leaves this machine
    cpu = ["--devices", "cpu"] if importlib.util.find_spec("torch_npu") else []  # an NPU environment: the CPU anyway
    argv = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        "ddp_with_profiler.py",
        "--out",
        "prof",
        *cpu,
        *args,
    ]
    return subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "my_project"
    folder.mkdir()
    assert not folder.resolve().is_relative_to(ROOT.resolve())
    shutil.copy2(LESSON, folder / LESSON.name)
    return folder


@pytest.mark.parametrize("model", [CONV_MODEL, GRU_MODEL], ids=["conv1d_layernorm_silu", "gru_no_loss"])
def test_the_copied_lesson_trains_on_two_ranks_and_writes_each_ranks_trace(project: Path, model: str) -> None:
    """(The lesson's own TinyMLP, no --model: the plain run of the accumulate test below.)"""
    (project / "my_model.py").write_text(model)
    proc = launch(project, "--model", "my_model.py")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert_each_ranks_trace_is_read(project)


def assert_each_ranks_trace_is_read(project: Path) -> None:
    """Each rank's trace in prof/, its 5 active steps and DDP's all-reduce in it, and the lab reading them."""
    traces = {rank: sorted((project / "prof").glob(f"*_rank{rank}.*.pt.trace.json")) for rank in (0, 1)}
    assert all(len(found) == 1 for found in traces.values()), sorted(p.name for p in (project / "prof").iterdir())
    for found in traces.values():
        names = {e.get("name") for e in json.loads(found[0].read_text())["traceEvents"]}
        assert {f"ProfilerStep#{n}" for n in range(4, 9)} <= names  # the 5 active steps of the schedule
        assert "gloo:all_reduce" in names  # DDP's gradient all-reduce, between the two processes
    # the lab reads the ranks' traces as they are: the cluster view of both ranks, and compare per rank
    cluster = run([sys.executable, "-m", "common", "cluster", str(project / "prof")])
    assert cluster.returncode == 0, cluster.stdout[-2000:] + cluster.stderr
    assert "2 ranks' torch.profiler traces, read through the lab's conversion" in cluster.stderr
    table = cluster.stdout.split("-- Per rank, median of the steps (us) --", 1)[1]
    assert [line.split()[0] for line in table.splitlines() if line[:4].strip().isdigit()] == ["0", "1"]
    compared = run([sys.executable, "-m", "common", "compare", str(project / "prof"), str(project / "prof"), "--json"])
    assert compared.returncode == 0, compared.stderr
    per_rank = json.loads(compared.stdout)["steps"]["per_rank"]
    assert [r["rank"] for r in per_rank] == [0, 1] and all(r["ratio"] == 1 for r in per_rank)
    assert sorted(p.name for p in (project / "prof").iterdir()) == sorted(p.name for t in traces.values() for p in t)


def test_a_missing_model_file_is_one_error_line(project: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "ddp_with_profiler.py", "--model", "nope.py"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert [line for line in proc.stderr.splitlines() if "error:" in line] == [
        "ddp_with_profiler.py: error: --model nope.py: no such readable file"
    ]


def _per_step(trace: Path, name: str) -> int:
    """How many events called ``name`` the trace's last ProfilerStep holds."""
    events = json.loads(trace.read_text())["traceEvents"]
    step = max((e for e in events if e.get("name", "").startswith("ProfilerStep#")), key=lambda e: e["ts"])
    return sum(1 for e in events if e.get("name") == name and step["ts"] <= e["ts"] <= step["ts"] + step["dur"])


def test_accumulate_runs_k_micro_batches_and_one_all_reduce_per_step(project: Path) -> None:
    """The lesson's gradient accumulation fix: --accumulate 3 runs three forwards per step, the first two under
    no_sync(): the step holds 3x the matmuls and as many all-reduces as plain DDP's (one per gradient bucket)."""
    proc = launch(project, "--accumulate", "3")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    accumulated = next((project / "prof").glob("*_rank0.*.pt.trace.json"))
    shutil.move(project / "prof", project / "k3")
    proc = launch(project)  # plain DDP on the lesson's own TinyMLP (no --model)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_each_ranks_trace_is_read(project)
    plain = next((project / "prof").glob("*_rank0.*.pt.trace.json"))
    accumulated = project / "k3" / accumulated.name
    assert _per_step(accumulated, "aten::addmm") == 3 * _per_step(plain, "aten::addmm") > 0
    assert _per_step(accumulated, "gloo:all_reduce") == _per_step(plain, "gloo:all_reduce") > 0
