"""A shipped workload (the CNN) and a model of the corpus with a dataclass output, through modes 01, 03, 04 and agree.

TinyMLP, the default, runs through every mode in test_agree.py (same steps, its declared
expectations all checked there); the shipped transformer through each mode on its own
(test_mode_cmdline.py, test_pyacl.py, test_mode_pytorch.py), and through agree with the whole corpus
(``nox -s corpus``). Here: one private copy of the lab; 02 runs once (it profiles
its own kernel), then each workload in turn: 01, 03 (its default variant) and 04 with ``--workload FILE``, then agree on the four
folders. Asserted: every step exits 0, agree names the workload and its hash, every tool's
record agrees with itself, the per-forward count rows are the families the model runs, 01's
equal to 04's, and the lesson checks are the workload's declared expectations, N/A where it
declares none. Bad inputs: outputs of two workloads, a workload file edited after the run.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import MODES, ROOT, assert_workload_checks, copy_lab, error_lines, lab_env

from common.render.sweep import sweep_report
from common.render.text import render_text
from common.collect.flop_count import count_flops
from common.workload import load_workload, tiny_mlp

RUN_ID = "workloads-test-run"
# The shipped CNN, and one model of the corpus (tests/corpus, the models people bring) whose output is a
# dataclass, as Hugging Face models return: the corpus slice of the suite; nox -s corpus runs all.
CORPUS_SLICE = "dict_output_modeloutput"
WORKLOADS = ["cnn", CORPUS_SLICE]


def _sh(repo: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        list(args),
        cwd=repo,
        env=lab_env(PYTHONPATH=str(repo), MSPROF_LAB_RUN_ID=RUN_ID),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """A private lab copy with 02's output (one kernel run serves every workload) and the workload files."""
    target = copy_lab(tmp_path_factory.mktemp("workloads") / "repo")
    shutil.copy(ROOT / "tests" / "corpus" / f"{CORPUS_SLICE}.py", target / "workloads")
    for script in (["02_api_AscendC/build.sh"], ["02_api_AscendC/run.sh", "0"]):
        proc = _sh(target, "bash", *script)
        assert proc.returncode == 0, f"{script}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    return target


def workload_file(repo: Path, name: str) -> Path:
    return repo / "workloads" / f"{name}.py"


@pytest.fixture(scope="module")
def results(repo: Path) -> dict[str, dict]:
    """Each workload through 01, 03 and 04, then agree; what each step printed, and agree's Markdown."""
    out = {}
    for name in WORKLOADS:
        file = workload_file(repo, name)
        flag = ["--workload", str(file)]
        steps = {}
        for key, script in (
            ("01", ["01_cmdline/run.sh", "0"]),
            ("03 build", ["03_api_pyAcl/build_model.sh", "default"]),
            ("03", ["03_api_pyAcl/run.sh", "0", "default"]),
            ("04", ["04_pyTorch/run.sh", "0"]),
        ):
            steps[key] = _sh(repo, "bash", *script, *flag)
        if all(p.returncode == 0 for p in steps.values()):
            agree_out = repo / f"agree_{name}"
            steps["agree"] = _sh(repo, sys.executable, "-m", "common", "agree", "--out", str(agree_out))
            steps["markdown"] = (agree_out / "agree.md").read_text() if (agree_out / "agree.md").is_file() else ""
            steps["info"] = json.loads((repo / "04_pyTorch" / "prof_out" / "run_info.json").read_text())
        out[name] = steps
    return out


def table_rows(markdown: str) -> dict[str, list[str]]:
    """The side-by-side table of agree.md: row name -> the four mode cells (01, 02, 03, 04)."""
    rows = {}
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 5:
            rows[cells[0]] = cells[1:]
    return rows


@pytest.mark.parametrize("name", WORKLOADS)
def test_a_workload_runs_through_every_mode_and_agree(repo: Path, results, name: str) -> None:
    steps = results[name]
    for key in ("01", "03 build", "03", "04"):
        proc = steps[key]
        assert proc.returncode == 0, f"{name} {key}: {proc.stdout[-3000:]}{proc.stderr[-2000:]}"
    if name == "cnn":  # what each mode's own run says of the shipped CNN (the transformer: test_mode_*.py)
        for key in ("01", "04"):
            assert_workload_checks(steps[key].stdout, key, name, {"conv", "pool", "norm"})
    agree = steps["agree"]
    file = workload_file(repo, name)
    work = load_workload(file)
    sha = hashlib.sha256(file.read_bytes()).hexdigest()
    assert steps["info"]["workload"] == {"name": name, "path": str(file.resolve()), "sha256": sha}
    assert steps["info"]["samples"] == int(work.inputs()[0].shape[0])  # the batch: what compare divides a step by
    assert f"workload: {name} | sha256 {sha[:12]} |" in agree.stdout, agree.stdout[:3000]

    verdicts = [line for line in agree.stdout.splitlines() if line.startswith("[")]
    failed = [line for line in verdicts if line.startswith("[FAIL]")]
    assert agree.returncode == 0 and not failed, f"{agree.stdout[-4000:]}{agree.stderr[-2000:]}"
    # none of them declares EXPECT: every lesson check is N/A, with the reason, and fails nothing
    not_applicable = [line for line in verdicts if line.startswith("[N/A]")]
    assert len(not_applicable) == 5, verdicts  # 3 x top family, the share, the cast check
    assert all(f"not applicable: {name} declares no EXPECT[" in line for line in not_applicable)
    for check in (
        "every forward records the same ops (01",
        "every step records the same ops (04",
        "01 and 04 record the same ops per forward",
        "op counts per execute match the built graph (03",
        "the exported graph computes what the model computes (03",
        "output matches fp32 reference (01)",
        "output matches fp32 reference (04)",
        "output matches fp32 reference (03 default",
    ):
        assert any(line.startswith(f"[PASS] {check}") for line in verdicts), (check, verdicts)

    # the count rows are the model's families: 01 and 04 record the same compute ops per forward (01's rows
    # also hold the one-off ops of building the model); no row of a family that no mode ran
    rows = table_rows(steps["markdown"])
    assert rows["workload, sha256"] == [
        f"{name} {sha[:12]}",
        "add_custom kernel",
        f"{name} {sha[:12]}",
        f"{name} {sha[:12]}",
    ]
    count_rows = {r.removesuffix(" per forward"): cells for r, cells in rows.items() if r.endswith(" per forward")}
    for family in set(count_rows) & {"matmul", "conv", "attention", "norm", "pool", "softmax"}:
        assert float(count_rows[family][0]) == float(count_rows[family][3]) > 0, family
    for family, cells in count_rows.items():
        assert any(float(c) > 0 for c in cells), f"{family} row with no ops in any mode"
    assert work.forward_flops(count_flops).per_family  # what 03's graph was compared with


def test_each_workload_shows_its_own_families(results) -> None:
    """The rows differ by model: what a CNN and the token classifier run, read from agree.md."""
    families = {
        name: {
            r.removesuffix(" per forward")
            for r in table_rows(results[name].get("markdown", ""))
            if r.endswith(" per forward")
        }
        for name in WORKLOADS
    }
    assert {"conv", "pool", "norm"} <= families["cnn"] and "attention" not in families["cnn"]
    assert {"matmul", "norm", "activation"} <= families[CORPUS_SLICE] and "conv" not in families[CORPUS_SLICE]


def test_agree_refuses_outputs_of_different_workloads(repo: Path, results, tmp_path: Path) -> None:
    """04 of the last workload, 01 and 03 of another (its run_info says so): one line naming modes and workloads."""
    dirs = []
    for mode in MODES:
        shutil.copytree(repo / mode / "prof_out", tmp_path / mode / "prof_out")
        dirs.append(tmp_path / mode / "prof_out")
    info_path = dirs[3] / "run_info.json"
    info = json.loads(info_path.read_text())
    info["workload"] = dict(tiny_mlp().info())
    info_path.write_text(json.dumps(info))
    proc = _sh(repo, sys.executable, "-m", "common", "agree", *map(str, dirs), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    (line,) = error_lines(proc.stderr)
    last = WORKLOADS[-1]
    sha = hashlib.sha256((repo / "workloads" / f"{last}.py").read_bytes()).hexdigest()[:12]
    assert line.startswith(
        f"Error: different workloads: 01 {last} (sha256 {sha}), 03 {last} (sha256 {sha}), "
        f"04 TinyMLP (sha256 {tiny_mlp().sha256[:12]}) — "
    ), line
    # 02 is exempt: it profiles its own kernel, whatever workload its run_info names
    info["workload"] = json.loads((dirs[0] / "run_info.json").read_text())["workload"]
    info_path.write_text(json.dumps(info))
    kernel = json.loads((dirs[1] / "run_info.json").read_text())
    kernel["workload"] = dict(tiny_mlp().info())
    (dirs[1] / "run_info.json").write_text(json.dumps(kernel))
    proc = _sh(repo, sys.executable, "-m", "common", "agree", *map(str, dirs), "--out", str(tmp_path / "o"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    # a run_info.json without a workload (written before runs recorded one) cannot be compared on it
    pyacl = json.loads((dirs[2] / "run_info.json").read_text())
    del pyacl["workload"]
    (dirs[2] / "run_info.json").write_text(json.dumps(pyacl))
    proc = _sh(repo, sys.executable, "-m", "common", "agree", *map(str, dirs), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and error_lines(proc.stderr) == [
        "Error: run_info.json of mode 03 records no workload, so it cannot be checked that 01, 03 and 04 profiled "
        "the same model — re-run the modes: nox -s cmdline ascendc pyacl pytorch -- 0 [--workload FILE]"
    ]


def test_agree_refuses_a_workload_file_edited_after_the_run(repo: Path, results, tmp_path: Path) -> None:
    last = repo / "workloads" / f"{WORKLOADS[-1]}.py"
    before = last.read_text()
    try:
        last.write_text(before + "\n# edited\n")
        proc = _sh(repo, sys.executable, "-m", "common", "agree", "--out", str(tmp_path / "o"))
    finally:
        last.write_text(before)
    assert proc.returncode == 2 and len(error_lines(proc.stderr)) == 1, proc.stdout + proc.stderr
    assert f"Error: workload file {last.resolve()} changed since the run (sha256 " in proc.stderr


# --- the sweep on a workload that is not TinyMLP ------------------------------------------------------
def test_sweep_of_a_cnn_sweeps_its_batch_and_checks_the_peak(repo: Path) -> None:
    proc = _sh(
        repo, sys.executable, "-m", "common.modes.pytorch.sweep", "--workload", "workloads/cnn.py", "--batch", "1,2"
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    doc = json.loads((repo / "04_pyTorch" / "prof_sweep" / "sweep.json").read_text())
    assert doc["x"] == "batch" and doc["workload"]["name"] == "cnn" and doc["peak_gflops_per_s"] > 0
    assert [(p["hidden"], p["batch"]) for p in doc["points"]] == [(None, 1), (None, 2)]
    work = load_workload(repo / "workloads" / "cnn.py")
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        work.forward(work.build_model(), work.make_input())
    for p in doc["points"]:  # the CNN's own FLOPs (batch 8 in make_input), scaled to the point's batch
        assert p["flops"] == counter.get_total_flops() * p["batch"] // 8
        assert p["gflops_per_s"] == pytest.approx(p["flops"] / p["computing_us"] / 1e3)
        assert p["above_peak"] == (p["gflops_per_s"] > doc["peak_gflops_per_s"])
    assert ("warning: (!)" in proc.stdout) == any(p["above_peak"] for p in doc["points"])
    assert re.search(r"^cnn: ((host|compute)-bound|no batch decided)", proc.stdout, re.MULTILINE)


def test_sweep_refuses_what_it_cannot_sweep_with_one_line(repo: Path, tmp_path: Path) -> None:
    fixed = tmp_path / "fixed_batch.py"
    fixed.write_text(
        "import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.lin = nn.Linear(8, 8)\n\n    def forward(self, x):\n"
        "        return self.lin(x.reshape(4, 8))\n\n\ndef build_model():\n    return M()\n\n\n"
        "def make_input():\n    return torch.randn(4, 8)\n"
    )
    for args, message in (
        (
            ["--workload", "workloads/cnn.py", "--hidden", "64"],
            "Error: --hidden sizes TinyMLP's layers; cnn has no hidden size the sweep can change — "
            "sweep its batch: --batch 1,4,16,64",
        ),
        (
            ["--workload", str(fixed), "--batch", "2"],
            f"Error: workload file {fixed.resolve()}: the model rejects batch 2 (make_input()'s first dimension 4 "
            "scaled, shapes (4, 8)): RuntimeError: shape '[4, 8]' is invalid for input of size 16 — profile it at "
            f"its own size instead: nox -s pytorch -- 0 --workload {fixed.resolve()}",
        ),
    ):
        proc = _sh(repo, sys.executable, "-m", "common.modes.pytorch.sweep", *args)
        assert proc.returncode == 2 and error_lines(proc.stderr) == [message], proc.stderr


def test_sweep_warns_about_a_figure_above_the_peak() -> None:

    point = {
        "series": "cnn",
        "hidden": None,
        "batch": 8,
        "step_us": 100.0,
        "computing_us": 1.0,
        "free_us": 99.0,
        "computing_ratio": 0.01,
        "bound": "host-bound",
        "flops": 10**9,
        "gflops_per_s": 1000.0,
    }
    text = render_text(sweep_report([{**point, "above_peak": True}], "test", "batch", 100e9, "a stated peak", 5))
    assert "1,000.0 (!)" in text and "warning: (!) 1 point(s) above the peak" in text
    assert "peak 100.0 GFLOP/s (a stated peak)" in text
    quiet = render_text(
        sweep_report([{**point, "gflops_per_s": 50.0, "above_peak": False}], "test", "batch", 100e9, "peak", 5)
    )
    assert "(!)" not in quiet and "warning" not in quiet


def test_agree_judges_03_outputs_by_03s_recorded_tolerance_and_checks_its_scale() -> None:
    """agree applies the tolerance 03 recorded, after checking the scale 03 used against the reference."""
    from common.analyze import cross_mode

    good = {
        "max_abs_diff": 0.01,
        "mean_abs_diff": 0.001,
        "cosine": 0.9999,
        "scale": 1.0,
        "tol": 0.02,
        "cosine_min": 0.999,
    }
    assert cross_mode.recorded_accuracy_verdict(good, 1.0, "03 x").ok
    assert not cross_mode.recorded_accuracy_verdict({**good, "max_abs_diff": 0.03}, 1.0, "03 x").ok
    wrong_scale = cross_mode.recorded_accuracy_verdict(good, 50.0, "03 x")
    assert not wrong_scale.ok and "the workload's is 50" in wrong_scale.detail
    assert not cross_mode.recorded_accuracy_verdict(None, 1.0, "03 x").ok
