"""Advice that reads the capture: the batch it ran, the precision its compute ran in, and where a precision
change is, the pointer to what measures its cost in accuracy."""

from __future__ import annotations

from pathlib import Path

from helpers import ROOT

from common.analyze import checks
from common.analyze.bounds import op as bounds
from common.analyze.bounds.step import StepSummary, advice, step_verdict
from common.analyze.compare import comparison_json, compare
from common.formats.outputs import SavedOutput
from common.formats.run_ops import RunOps
from common.render.compare import sides_line
from common.workload import load_workload


def test_host_bound_advice_names_the_runs_batch_and_the_compare_that_judges_a_larger_one() -> None:
    host_bound = StepSummary(5, 1000.0, 200.0, 800.0)
    knows = " ".join(bounds.run_hint(host_bound, None, None, "fp32", 32))
    assert "this run's batch is 32 samples; 64 or more" in knows
    assert "python -m common compare <before> <after> --samples 32 64" in knows
    unknown = " ".join(bounds.run_hint(host_bound, None, None, "fp32", None))
    assert "a larger batch amortizes" in unknown and "this run's batch" not in unknown
    device_bound = " ".join(bounds.run_hint(StepSummary(5, 1000.0, 900.0, 100.0), None, None, "fp32", 32))
    assert "batch" not in device_bound  # a batch does not shorten a device-bound step's work per sample
    mixed = StepSummary(5, 1000.0, 300.0, 400.0, 300.0, 300.0)
    assert step_verdict(mixed).kind == "mixed"
    assert "this run's batch is 8 samples" in " ".join(advice(mixed, None, None, 8))


def _side(precision: str, samples: int, us: float) -> list[RunOps]:
    dtypes = {"fp32": "float;float;float", "bf16": "c10::BFloat16;c10::BFloat16;c10::BFloat16"}[precision]
    return [
        RunOps(
            Path(f"{precision}{i}"),
            {"mode": "pytorch", "backend": "portable", "workload": {"name": "m"}},
            "forward",
            {("", "aten::addmm", "32,1024"): us + i},
            samples=samples,
            dtype_us={("aten::addmm", dtypes): us + i, ("aten::gelu", "float"): 10.0},
        )
        for i in range(3)
    ]


def test_compare_shows_both_sides_precision_and_batch_and_points_to_precision_when_it_changed() -> None:
    changed = compare(_side("fp32", 32, 900.0), _side("bf16", 32, 300.0), 10)
    assert changed.precision == ("fp32", "bf16") and changed.precision_changed
    (line,) = sides_line(changed)
    assert line.startswith("sides: compute precision fp32 -> bf16; samples per step 32 (both)")
    assert "python -m common precision" in line
    as_json = comparison_json(changed, checks.Verdict("v", True, ""))
    assert as_json["precision"] == {"baseline": "fp32", "candidate": "bf16"}
    assert as_json["samples"] == {"baseline": 32, "candidate": 32}
    same = compare(_side("fp32", 32, 900.0), _side("fp32", 64, 800.0), 10)
    (line,) = sides_line(same)
    assert "compute precision fp32 (both); samples per step 32 -> 64" in line and "precision measures" not in line
    bare = [RunOps(Path("x"), None, "run", {("", "aten::addmm", "32,1024"): 1.0})]
    assert sides_line(compare(bare, bare, 10)) == []  # a capture that says neither: no line


def test_the_output_check_of_a_bf16_model_says_its_reference_is_itself_and_names_the_precision_command() -> None:
    work = load_workload(ROOT / "tests/corpus/bf16_mlp.py")
    assert work.precision == "bf16"
    verdict = checks.check_output_file(
        SavedOutput(Path("o.npy"), list(work.reference_output_arrays())), "04", work.expected()
    )
    assert verdict.ok and "the reference is the model itself in bf16" in verdict.detail
    assert f"python -m common precision --workload {work.path}" in verdict.detail
    fp32 = load_workload(ROOT / "workloads/cnn.py")
    assert (
        "python -m common precision"
        not in checks.check_output_file(
            SavedOutput(Path("o.npy"), list(fp32.reference_output_arrays())), "04", fp32.expected()
        ).detail
    )
