"""03's lesson files copied alone into a folder outside the repository, beside a model the lab has never seen:
export_onnx.py writes the ONNX file, infer.py runs it under ONNX Runtime's profiler (the portable path)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT, run as run_lab

LESSONS = ROOT / "03_api_pyAcl" / "src"
# A model of the test's own: Conv1d + LayerNorm + SiLU with a residual, and a GRU head; two outputs, as a dict.
MODEL = """
import torch
from torch import nn


class ConvGru(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(8, 8, kernel_size=3, padding=1)
        self.norm = nn.LayerNorm(8)
        self.act = nn.SiLU()
        self.gru = nn.GRU(8, 12, batch_first=True)

    def forward(self, signal):
        h = self.act(self.norm(self.conv(signal).transpose(1, 2))) + signal.transpose(1, 2)
        seq, last = self.gru(h)
        return {"seq": seq, "last": last[0]}


def build_model():
    return ConvGru()


def make_input():
    return torch.randn(2, 8, 16)
"""


@pytest.fixture(scope="module")
def alone() -> Path:
    """An empty folder outside the repository with the two lesson files and the model file, nothing else."""
    folder = Path(tempfile.mkdtemp(prefix="copy_pyacl_"))
    assert not folder.resolve().is_relative_to(ROOT.resolve())
    for name in ("export_onnx.py", "infer.py"):
        shutil.copy2(LESSONS / name, folder / name)
    (folder / "conv_gru.py").write_text(MODEL)
    yield folder
    shutil.rmtree(folder)


def run(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MSPROF_LAB_WORKLOAD")}  # no lab
    return subprocess.run(
        [sys.executable, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_export_then_infer_with_onnx_runtime(alone: Path) -> None:
    exported = run(alone, "export_onnx.py", "--model", "conv_gru.py", "--out", "model.onnx")
    assert exported.returncode == 0, exported.stderr
    assert "inputs signal, outputs y0, y1" in exported.stdout and (alone / "model.onnx").is_file()
    ran = run(alone, "infer.py", "--onnx", "model.onnx", "--save-output", "out.npy")
    assert ran.returncode == 0, ran.stderr
    (profile,) = (alone / "prof_out").glob("onnxruntime_profile_*.json")  # ONNX Runtime's own file
    events = json.loads(profile.read_text())
    assert len([e for e in events if e.get("name") == "model_run"]) == 3 + 20  # warm-up and measured runs
    assert any(e.get("cat") == "Node" for e in events)
    assert np.load(alone / "out.npy").shape == (2, 16, 12) and np.load(alone / "out_1.npy").shape == (2, 12)
    # what the copy wrote, read by the lab as it is: the measured runs' node events, op by op, as msprof's files
    kept = profile.read_bytes()
    report = run_lab([sys.executable, "-m", "common", "report", str(alone / "prof_out")])
    assert report.returncode == 0, report.stderr
    assert "is an ONNX Runtime profile, read as msprof's files: 23 runs recorded, the first left out" in report.stderr
    nodes = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    op_types = {e["args"]["op_name"] for e in nodes}
    table = report.stdout.split("-- Top ops", 1)[1].split("-- ", 1)[0]
    assert {line.split()[0] for line in table.splitlines()[3:] if line.strip()} <= op_types
    compared = run_lab([sys.executable, "-m", "common", "compare", str(profile), str(alone / "prof_out"), "--json"])
    assert compared.returncode == 0, compared.stderr
    doc = json.loads(compared.stdout)
    first = min(e["ts"] for e in events if e.get("name") == "model_run")
    measured = sum(e["dur"] for e in nodes if e["ts"] > first + 1e-9 and not _in_first_run(e, events))
    assert (
        doc["total"]["baseline_us"] == pytest.approx(measured, rel=1e-9)
        and doc["total"]["candidate_us"] == doc["total"]["baseline_us"]
    )
    assert profile.read_bytes() == kept and sorted(p.name for p in (alone / "prof_out").iterdir()) == sorted(
        [profile.name, "report.md", "report.html"]
    )  # read only: the report beside it, nothing else


def _in_first_run(event: dict, events: list[dict]) -> bool:
    runs = sorted((e for e in events if e.get("name") == "model_run"), key=lambda e: e["ts"])
    return runs[0]["ts"] <= event["ts"] <= runs[0]["ts"] + runs[0]["dur"]


def test_the_lessons_own_tinymlp_without_a_model_file(alone: Path, tmp_path: Path) -> None:
    exported = run(alone, "export_onnx.py", "--out", str(tmp_path / "tiny.onnx"))
    assert exported.returncode == 0 and '--input_shape="x:32,1024"' in exported.stdout, exported.stderr
    inputs = tmp_path / "x.npz"
    np.savez(inputs, np.ones((32, 1024), np.float32))
    ran = run(
        alone,
        "infer.py",
        "--onnx",
        str(tmp_path / "tiny.onnx"),
        "--inputs",
        str(inputs),
        "--out",
        str(tmp_path / "prof"),
        "--warmup",
        "1",
        "--measured",
        "2",
        "--save-output",
        str(tmp_path / "y.npy"),
    )
    assert ran.returncode == 0, ran.stderr
    assert np.load(tmp_path / "y.npy").shape == (32, 1024) and list((tmp_path / "prof").glob("*.json"))


def test_a_missing_model_file_is_one_error_line(alone: Path) -> None:
    for args in (["export_onnx.py", "--model", "nothere.py"], ["infer.py", "--onnx", "nothere.onnx"]):
        done = run(alone, *args)
        errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
        assert done.returncode != 0 and len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
