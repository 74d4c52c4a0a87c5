"""Verdicts that hold under noise: medians with their spread decide, one slow forward or step decides nothing,
a run too noisy to decide says so, and a real difference still fails."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from common.analyze import checks, families, robust
from common.analyze.compare import compare
from common.analyze.slow_rank import find_slow_rank, rank_summaries
from common.formats.cluster import ClusterView
from common.formats.records import StepTime, Task
from common.formats.run_ops import RunOps
from common.formats.writers import aggregate_op_statistic


def _forward(start: float, ops: list[tuple[str, float]], step: int | None = None) -> list[Task]:
    out, t = [], start
    for op, dur in ops:
        out.append(Task(op, op, "CPU", t, dur, input_shapes="32,1024", step_id=step))
        t += dur + 1
    return out


def _mlp(gelu_us: float, addmm_us: float = 700.0, step: int | None = None, start: float = 0.0) -> list[Task]:
    return _forward(start, [("aten::addmm", addmm_us), ("aten::gelu", gelu_us)] * 3 + [("aten::addmm", addmm_us)], step)


# --- the statistics ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "values", [[3.0], [1.0, 2.0], [5.0, 1.0, 4.0, 2.0, 3.0], list(np.random.default_rng(0).random(37))]
)
def test_quantiles_follow_numpys_default_rule(values: list[float]) -> None:
    for q in (0.0, 0.25, 0.5, 0.75, 1.0):
        assert robust.quantile(values, q) == pytest.approx(float(np.quantile(values, q)))
    est = robust.estimate(values)
    assert est.median == pytest.approx(float(np.median(values))) and est.n == len(values)


def test_an_agreement_is_ok_failed_or_inconclusive() -> None:
    tight_a, tight_b = robust.Estimate(95, 94.5, 95.5, 20), robust.Estimate(80, 79.5, 80.5, 5)
    assert robust.agreement(tight_a, robust.Estimate(90, 89, 91, 5), 10, 10).outcome == "ok"
    failed = robust.agreement(tight_a, tight_b, 10, 10)
    assert failed.outcome == "failed" and failed.tolerance == pytest.approx(10 + np.hypot(1, 1))
    wide = robust.agreement(tight_a, robust.Estimate(40, 30, 55, 5), 10, 10)
    assert wide.outcome == "inconclusive" and wide.noise > 10


# --- family shares: one slow forward does not decide --------------------------------------------------------
def test_one_slow_forward_moves_the_sum_not_the_median() -> None:
    groups = [_mlp(40, start=10_000 * i) for i in range(1, 5)]
    groups.insert(0, _forward(0, [("aten::addmm", 700.0), ("aten::gelu", 6000.0)] * 3 + [("aten::addmm", 700.0)]))
    stats = aggregate_op_statistic([t for g in groups for t in g])
    summed = families.forward_shares(stats)
    assert summed["activation"] > summed["matmul"]  # the sum is decided by one forward
    assert not checks.check_top_family(stats, "matmul", "t").ok
    verdict = checks.check_top_family(stats, "matmul", "t", groups=groups)
    assert verdict.ok and verdict.detail.startswith("median share over 5 forwards: matmul 95.9% (IQR 95.9-95.9)")


def test_a_family_that_leads_in_every_forward_still_fails() -> None:
    groups = [_mlp(gelu, addmm_us=100, start=10_000 * i) for i, gelu in enumerate([900, 950, 1000, 920, 980])]
    verdict = checks.check_top_family([], "matmul", "t", groups=groups)
    assert verdict.applicable and not verdict.ok and "activation leads by" in verdict.detail


def test_two_families_within_their_spread_are_inconclusive() -> None:
    groups = [_mlp(gelu, addmm_us=100, start=10_000 * i) for i, gelu in enumerate([120, 180, 140, 160, 130, 170])]
    verdict = checks.check_top_family([], "matmul", "t", groups=groups, unit="step")
    assert not verdict.applicable and verdict.detail.startswith("inconclusive: ") and "over 6 steps" in verdict.detail


# --- 01 vs 04: the share agreement ------------------------------------------------------------------------
def _shares(gelus: list[float], addmm: float = 700.0, step: bool = False) -> tuple[dict, dict]:
    groups = [_mlp(g, addmm, i + 1 if step else None, 10_000 * i) for i, g in enumerate(gelus)]
    return families.forward_share_estimates(groups)["matmul"], checks.per_call_medians(groups)


def test_the_share_agreement_passes_within_its_tolerance_and_prints_it() -> None:
    (a, pa), (b, pb) = _shares([40, 42, 41, 45, 40, 43]), _shares([48, 50, 47, 52, 49], step=True)
    verdict = checks.check_share_agreement({"01": a, "04": b}, "matmul", {"01": pa, "04": pb})
    assert verdict.ok and verdict.applicable
    assert "points allowed + " in verdict.detail and "measured noise" in verdict.detail
    assert "01 median" in verdict.detail


def test_a_share_difference_with_the_same_op_speeds_fails() -> None:
    """A collector that counts the GELU's time three times over: the same per-call time would not give this."""
    (a, pa) = _shares([40] * 20)
    b = robust.Estimate(0.70, 0.69, 0.71, 5)
    verdict = checks.check_share_agreement({"01": a, "04": b}, "matmul", {"01": pa, "04": pa})
    assert verdict.applicable and not verdict.ok


def test_one_process_running_an_op_slower_is_inconclusive_on_the_cpu_and_fails_on_an_npu() -> None:
    (a, pa), (b, pb) = _shares([40] * 20), _shares([400, 410, 395, 405, 400], step=True)
    portable = checks.check_share_agreement({"01": a, "04": b}, "matmul", {"01": pa, "04": pb})
    assert not portable.applicable and "the same op (aten::gelu [32,1024]) took a median 40.0 us" in portable.detail
    npu = checks.check_share_agreement({"01": a, "04": b}, "matmul", None)
    assert npu.applicable and not npu.ok


def test_a_run_too_disturbed_is_inconclusive_with_its_numbers() -> None:
    (a, pa) = _shares([40] * 20)
    b = robust.Estimate(0.40, 0.25, 0.55, 5)
    verdict = checks.check_share_agreement({"01": a, "04": b}, "matmul", {"01": pa, "04": pa})
    assert not verdict.applicable and verdict.detail.startswith("inconclusive: the runs' own spread")


# --- op time vs Computing, per step -----------------------------------------------------------------------
def _step(step: int, computing: float) -> StepTime:
    return StepTime(step, computing, 0.0, 0.0, 0.0, 10.0, computing + 10.0, 0.0, None)


def test_op_time_vs_computing_is_judged_per_step_on_the_median() -> None:
    tasks = [t for i in range(5) for t in _mlp(40, step=i + 1, start=10_000 * i)]
    per_step = sum(t.duration_us for t in tasks) / 5
    steps = [_step(i + 1, per_step) for i in range(5)]
    steps[2] = _step(3, per_step * 3)  # one step's table row damaged
    verdict = checks.check_sum_vs_computing(tasks, steps, "t")
    assert verdict.ok and "off by median 0.0% (largest 66.7%" in verdict.detail
    assert not checks.check_sum_vs_computing(tasks, [_step(i + 1, per_step * 1.5) for i in range(5)], "t").ok


# --- the slow rank: one stalled step does not decide -------------------------------------------------------
def _rank_rows(computing: list[float], free: list[float], comm: float) -> list[StepTime]:
    return [
        StepTime(i + 1, c, comm, 0.0, comm, f, c + comm + f, 0.0, None) for i, (c, f) in enumerate(zip(computing, free))
    ]


def test_a_host_stall_in_one_step_does_not_turn_a_compute_slow_rank_into_a_free_one() -> None:
    """The transformer demo's case: rank 1 has 8x the work; one 0.2 s stall in its last step (Free)."""
    steps = {0: _rank_rows([1000] * 5, [100] * 5, 7000), 1: _rank_rows([8000] * 5, [100] * 4 + [200_000], 100)}
    view = ClusterView(Path("."), [], None, steps)
    slow = find_slow_rank(rank_summaries(view))
    assert (slow.rank, slow.reason) == (1, "computing"), slow.text


# --- compare: a regression beyond the threshold and beyond the runs' own spread -----------------------------
def _runs(addmm: list[float], gelu: list[float]) -> list[RunOps]:
    return [
        RunOps(
            Path(f"r{i}"),
            {"mode": "pytorch", "backend": "portable"},
            "forward",
            {("", "aten::addmm", "32,1024"): a, ("", "aten::gelu", "32,1024"): g},
        )
        for i, (a, g) in enumerate(zip(addmm, gelu))
    ]


def test_compare_flags_a_slowdown_beyond_the_spread_and_says_when_the_spread_decides() -> None:
    base = _runs([2800, 2810, 2790], [150, 152, 149])
    slower = compare(base, _runs([3400, 3410, 3390], [150, 151, 150]), 10)
    assert [d.key[1] for d in slower.regressions] == ["aten::addmm"] and slower.total_flagged
    assert not checks.check_regressions(slower).ok
    noisy = compare(base, _runs([2000, 3400, 4200], [150, 151, 150]), 10)  # median +21%, but the runs spread 2,200 us
    assert not noisy.regressions and [d.key[1] for d in noisy.undecided] == ["aten::addmm"]
    verdict = checks.check_regressions(noisy)
    assert verdict.ok and "too noisy to decide: the total, aten::addmm" in verdict.detail
    one = checks.check_regressions(compare(base[:1], _runs([3400], [150]), 10))
    assert not one.ok and "one run on a side: no spread measured" in one.detail


# --- compare's step view: a fix judged per sample, on the noise ----------------------------------------------
def _steps(totals: list[float], free: float = 100.0) -> list[StepTime]:
    return [StepTime(i, t - free, 0.0, 0.0, 0.0, free, t, 0.0, None) for i, t in enumerate(totals, 1)]


def test_the_step_view_calls_a_gain_a_regression_or_within_noise_and_divides_by_the_samples() -> None:
    from common.analyze.compare_steps import compare_steps, step_side

    base = step_side([_steps([1000, 1010, 990, 1005, 995])], 1)
    batch = compare_steps(base, step_side([_steps([4000, 4040, 3960, 4020, 3980])], 32), 10)
    assert batch.metric == "step time per sample" and batch.verdict == "gain"
    assert batch.per_sample_ratio == pytest.approx((4000 / 32) / 1000)
    slower = compare_steps(base, step_side([_steps([1300, 1310, 1290, 1305, 1295])], 1), 10)
    assert slower.verdict == "regression" and slower.per_sample_ratio == pytest.approx(1.3)
    noisy = compare_steps(base, step_side([_steps([700, 1500, 1100, 900, 1400])], 1), 10)
    assert noisy.verdict == "within noise"  # +10% by the median, the spread is ten times that
    unknown = compare_steps(step_side([_steps([1000] * 3)], None), step_side([_steps([900] * 3)], None), 10)
    assert unknown.metric == "step time" and unknown.per_sample_ratio is None and unknown.verdict == "gain"


def test_the_rank_that_held_every_step_not_the_one_that_stalled_once_is_the_one_waited_for() -> None:
    """Rank 1 reaches every step's all-reduce 8 ms late (it has more work); rank 0 stalls 200 ms once."""
    from common.analyze.slow_rank import collective_arrivals
    from common.formats.cluster import RankProfile

    class Profile(RankProfile):
        def __init__(self, rank: int, starts: dict[str, float]) -> None:
            super().__init__(rank, Path("."), {})
            self.__dict__.update(collective_starts=starts, collectives_source="communication.json")

    base = {f"{s}/gloo_all_reduce_{s}_0@world": 100_000.0 * s for s in range(1, 6)}
    rank0 = {k: v + (200_000.0 if k.startswith("3/") else 0.0) for k, v in base.items()}
    rank1 = {k: v + 8_000.0 for k, v in base.items()}
    arrivals = collective_arrivals(ClusterView(Path("."), [Profile(0, rank0), Profile(1, rank1)], None, {}))
    assert arrivals.held_us[0] > arrivals.held_us[1]  # the sum is decided by the one stall ...
    assert arrivals.holder() == 1  # ... the median over the steps is not


def test_a_named_slow_rank_gets_its_remedy_whatever_the_step_verdict() -> None:
    from common.analyze.cluster import _step_advice
    from common.analyze.slow_rank import SlowRank

    slow = SlowRank(1, "computing", "slowest rank: 1")
    compute_bound = ["compute-bound: ...", "hypothesis: ...", "try: the per-op bounds", "evidence: ..."]
    advice = _step_advice(compute_bound, None, False, slow)
    assert advice[3].startswith("try (slow rank 1): it computes longest") and advice[-1] == "evidence: ..."
    with_comm = ["mixed: ...", "try (Computing): ...", "try (Communication(Not Overlapped)): overlap ..."]
    assert _step_advice(with_comm, None, False, slow)[2].startswith("try (slow rank 1)")
    assert not any("slow rank" in line for line in _step_advice(compute_bound, None, False, SlowRank(None, None, "")))


# --- advice and bounds that know the precision the capture ran in -------------------------------------------
def test_a_bf16_op_is_not_judged_against_an_fp32_peak_and_lower_precision_is_not_suggested_again() -> None:
    from common.analyze.bounds import op as bounds

    peaks = bounds.Peaks("cpu", 1e11, 2e10, "calibrated", "fp32")

    def mm(dtypes: str) -> Task:
        return Task(
            "aten::addmm", "aten::addmm", "CPU", 0.0, 50.0, input_shapes="256;8,1024;1024,256", input_dtypes=dtypes
        )

    (bf16,) = bounds.op_bounds([mm("BFloat16;BFloat16;BFloat16")], peaks)  # as torch.profiler names them
    (fp32,) = bounds.op_bounds([mm("float;float;float")], peaks)
    assert fp32.bound in ("compute", "memory") and fp32.compute_us is not None
    assert bf16.compute_us is None and bf16.lower_bound_us == bf16.memory_us  # the bytes still bound it
    assert bf16.bound == "memory at least (bf16 op, no bf16 peak (fp32 measured): no compute bound)"
    assert bf16.achieved <= 1
    # with a bf16 peak of its own (a CPU with bf16 matrix units: calibrated at 5x the fp32 one) it is judged by it
    both = bounds.Peaks("cpu", 1e11, 2e10, "calibrated", "fp32", (("bf16", 5e11),))
    (own,) = bounds.op_bounds([mm("BFloat16;BFloat16;BFloat16")], both)
    assert own.compute_us == pytest.approx(1e6 * 2 * 8 * 256 * 1024 / 5e11) and own.reason is None
    (wide,) = bounds.op_bounds([mm("float;float;float")], both)
    assert wide.compute_us == pytest.approx(5 * own.compute_us)  # an fp32 op keeps the fp32 peak
    assert both.flops_at("fp16") is None and bounds.DEVICE_PEAKS["Ascend910B3"].flops_at("fp32") is not None
    assert bounds.op_precision("BF16;BF16") == "bf16" and bounds.op_precision("FLOAT16") == "fp16"
    hint = bounds.run_hint(StepSummaryFor(900, 100), None, None)
    assert "lower precision (fp16/bf16) for the families" in " ".join(hint)
    done = " ".join(bounds.run_hint(StepSummaryFor(900, 100), None, None, "bf16"))
    assert "lower precision (fp16/bf16)" not in done and "already runs in bf16" in done
    assert "python -m common precision" in done


def StepSummaryFor(computing: float, free: float):
    from common.analyze.bounds.step import StepSummary

    return StepSummary(1, computing + free, computing, free)


@pytest.mark.parametrize("shape", ["normal", "ties", "one value mostly", "two neighbouring values", "lognormal"])
def test_the_streamed_median_is_numpys_median_read_in_blocks(shape: str, monkeypatch) -> None:
    """Exact, whatever the blocks and the values: narrowing bin by bin (a few bins and candidates here, so that it
    narrows several times) ends on np.median's value, the mean of the two middle ones for an even count."""
    monkeypatch.setattr(robust, "BINS", 8)
    monkeypatch.setattr(robust, "CANDIDATES", 50)
    rng = np.random.default_rng(7)
    for n in (1, 2, 51, 1000, 4001):
        values = {
            "normal": rng.normal(size=n) * 1e3,
            "ties": np.round(rng.exponential(size=n) * 5),
            "one value mostly": np.where(rng.random(n) < 0.8, 3.25, rng.normal(size=n)),
            "two neighbouring values": np.where(rng.random(n) < 0.5, 1.0, np.nextafter(1.0, 2.0)),
            "lognormal": rng.lognormal(size=n) * 1e6,
        }[shape]
        for size in (7, 333, n):

            def blocks(size=size):
                return (values[i : i + size] for i in range(0, n, size))

            assert robust.streamed_median(blocks) == float(np.median(values))
    assert np.isnan(robust.streamed_median(lambda: iter([np.array([1.0, np.nan])])))
    assert np.isnan(robust.streamed_median(lambda: iter([])))
