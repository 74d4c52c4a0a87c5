"""How a pair is judged: the medians' gain, beyond the noise only when the runs' ranges do not overlap, and the
precision re-check against the baseline's own output with the tolerance of the fix's precision."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT, laid_out

from common.modes.fix.pairs import NPU_ONLY, PAIRS
from common.modes.fix.run import Outcome, pair_json, precision_check
from common.modes.fix.sides import Sample
from common.render.fix import fix_report


def _side(values: list[float], verdict: str = "host-bound: ...", output=None) -> list[Sample]:
    return [Sample(v, verdict, Path(f"r{i}"), output) for i, v in enumerate(values)]


def test_a_gain_is_beyond_the_noise_only_when_every_run_after_beat_every_run_before() -> None:
    pair = next(p for p in PAIRS if p.name == "batch")
    apart = Outcome(pair, _side([100, 104, 98]), _side([60, 66, 61], "compute-bound: ..."))
    assert apart.gain_pct == pytest.approx(100 * (100 - 61) / 100) and apart.beyond_noise and apart.answer == "gain"
    overlap = Outcome(pair, _side([100, 104, 98]), _side([60, 99, 61]))
    assert not overlap.beyond_noise and overlap.answer == "within noise"
    slower = Outcome(pair, _side([100, 104, 98]), _side([120, 130, 125]))
    assert slower.beyond_noise and slower.answer == "slower" and slower.gain_pct < 0
    assert Outcome.middle(_side([3, 1, 2])).value == 2
    row = pair_json(apart)
    assert row["verdict_before"].startswith("host-bound") and row["verdict_after"].startswith("compute-bound")
    assert row["before"] == {"median": 100, "min": 98, "max": 104, "n": 3}


def test_the_precision_re_check_uses_the_fixs_precision_and_fails_a_wrong_output() -> None:
    pair = next(p for p in PAIRS if p.name == "bf16")
    ref = [np.linspace(-1, 1, 64)]
    close = Outcome(pair, _side([10, 10, 10], output=ref), _side([5, 5, 5], output=[ref[0] + 1e-3]))
    check = precision_check(close)
    assert check["ok"] and check["tolerance"] == pytest.approx(0.16)  # bf16: 0.16 x max|ref| 1
    wrong = Outcome(pair, _side([10, 10, 10], output=ref), _side([5, 5, 5], output=[-ref[0]]))
    assert not precision_check(wrong)["ok"]
    missing = Outcome(pair, _side([10], output=ref), _side([5], output=None))
    assert precision_check(missing)["ok"] is False and precision_check(missing)["max_abs_diff"] is None
    batch = next(p for p in PAIRS if p.name == "batch")
    assert precision_check(Outcome(batch, _side([1]), _side([1]))) is None


def test_every_pair_names_its_finding_fix_and_source_and_the_pages_show_them() -> None:
    assert len({p.name for p in PAIRS + NPU_ONLY}) == len(PAIRS + NPU_ONLY) and len(PAIRS) >= 6
    assert all(p.finding and p.fix and p.source and not p.npu_only for p in PAIRS)
    assert all(p.npu_only and p.expect and "http" in p.source for p in NPU_ONLY)
    pair = next(p for p in PAIRS if p.name == "batch")
    rows = [pair_json(Outcome(pair, _side([100, 104, 98]), _side([60, 66, 61], "compute-bound: ...")))]
    for page in laid_out(fix_report(rows, {"fp16": "why"}, ["head"])):
        assert "batch" in page and "+39.0%" in page and "fp16: why" in page


def test_a_users_model_picks_its_pairs_and_the_kernel_pair_stays_the_labs(tmp_path) -> None:
    """--workload: each pair runs the user's model, or says why not; 02's tiling pair measures the lab's own kernel,
    so it is skipped there, saying how to run it."""
    from common.modes.fix.workloads import plan

    sides, skipped = plan(
        str(ROOT / "workloads" / "transformer.py"), {"batch", "tiles"}, tmp_path / "models", tmp_path / "ddp"
    )
    assert "batch" in sides and "tiles" not in sides
    assert "without --workload" in skipped["tiles"]
    default, _ = plan(None, {"tiles"}, tmp_path / "models", tmp_path / "ddp")
    assert "tiles" in default
