"""From finding to fix: run each pair whose finding fires, baseline and fix interleaved, and judge the gain.

What the lab does: for every pair of :mod:`common.modes.fix.pairs` that applies to the workload, run the lesson
as the baseline once and read its own verdict (the finding); if the finding fires, run the baseline and the fix
``--repeat`` times each, interleaved (before, after, before, after, ...), read every run back through the lab's
conversions, and compare the medians. A gain counts as beyond the noise only when every fixed run beat every
baseline run. A fix that can change the numbers is re-checked against the baseline's own output (the same tool,
the same model, in fp32) with the tolerance of the precision it computes in.

Usage: ``nox -s fix [-- device] [--repeat N] [--workload FILE] [--pairs batch,bf16,...]``; it writes
``fix_out/fix.json``, ``fix.md`` and ``report.html``, and keeps every run under ``fix_out/runs/``.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from common.analyze.precision import TOLERANCES, judge, op_metrics
from common.errors import LabError, run_cli
from common.formats.rundir import check_output_dir, prepare_output_dir
from common.modes import ROOT
from common.modes.fix.pairs import PAIRS, Pair
from common.modes.fix.sides import Sample

OUT = ROOT / "fix_out"
DDP_RUNS = ROOT / "04_pyTorch" / "prof_out_fix"  # the DDP driver writes inside its mode's folder
DEFAULT_REPEAT, MAX_REPEAT = 3, 20


@dataclass
class Outcome:
    pair: Pair
    before: list[Sample]
    after: list[Sample]

    def stats(self, side: list[Sample]) -> dict:
        values = [s.value for s in side]
        return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}

    @property
    def gain_pct(self) -> float:
        b, a = self.stats(self.before)["median"], self.stats(self.after)["median"]
        return 100 * (b - a) / b if b else 0.0

    @property
    def beyond_noise(self) -> bool:
        """Every fixed run faster than every baseline run (or every one slower): the ranges do not overlap."""
        b, a = self.stats(self.before), self.stats(self.after)
        return a["max"] < b["min"] or a["min"] > b["max"]

    @property
    def answer(self) -> str:
        if not self.beyond_noise:
            return "within noise"
        return "gain" if self.gain_pct > 0 else "slower"

    @staticmethod
    def middle(side: list[Sample]) -> Sample:
        """The run whose value is the side's median (the lower middle one for an even count)."""
        return sorted(side, key=lambda s: s.value)[(len(side) - 1) // 2]


def precision_check(outcome: Outcome) -> dict | None:
    """The fixed run's output against the baseline's own (fp32) output, with the tolerance of the precision the
    fix computes in (common.analyze.precision.TOLERANCES); None for a fix that cannot change the numbers."""
    pair = outcome.pair
    if pair.numerics is None:
        return None
    ref, got = Outcome.middle(outcome.before).output, Outcome.middle(outcome.after).output
    if not ref or not got or [a.shape for a in ref] != [a.shape for a in got]:
        return {
            "max_abs_diff": None,
            "tolerance": None,
            "ok": False,
            "detail": "no output to compare (or another shape) in the runs' output.npy",
        }
    tol = TOLERANCES[pair.numerics]
    flat_r, flat_g = (np.concatenate([a.ravel() for a in side]) for side in (ref, got))
    metrics = op_metrics(flat_g, flat_r)  # the per-op precision check's metrics and judgement, on the output
    beyond = judge(metrics, tol, float((~np.isfinite(flat_r)).mean()))  # what the reference has is not blamed
    diff, scale, limit = metrics["max_abs_err"], metrics["scale"], tol.abs_limit(metrics["scale"])
    return {
        "max_abs_diff": diff,
        "tolerance": limit,
        "ok": not beyond,
        "detail": f"against the baseline's fp32 output: max abs diff {diff:.3g} (tolerance {tol.describe()}: "
        f"{limit:.3g} at max|ref| {scale:.3g}), cosine {metrics['cosine']:.6f}"
        + (f"; beyond: {beyond}" if beyond else ""),
    }


def pair_json(o: Outcome) -> dict:
    p = o.pair
    return {
        "name": p.name,
        "finding": Outcome.middle(o.before).verdict,
        "finding_class": p.finding,
        "fix": p.fix,
        "mode": p.mode,
        "metric": p.metric,
        "unit": p.unit,
        "before": o.stats(o.before),
        "after": o.stats(o.after),
        "gain_pct": o.gain_pct,
        "beyond_noise": o.beyond_noise,
        "answer": o.answer,
        "verdict_before": Outcome.middle(o.before).verdict,
        "verdict_after": Outcome.middle(o.after).verdict,
        "precision": precision_check(o),
        "npu_only": False,
        "source": p.source,
        "note": p.note,
        "runs": {"before": [str(s.folder) for s in o.before], "after": [str(s.folder) for s in o.after]},
    }


def npu_only_json(p: Pair) -> dict:
    return {
        "name": p.name,
        "finding": p.finding,
        "finding_class": p.finding,
        "fix": p.fix,
        "mode": p.mode,
        "metric": p.metric,
        "unit": p.unit,
        "before": None,
        "after": None,
        "gain_pct": None,
        "beyond_noise": None,
        "answer": "needs an NPU",
        "verdict_before": None,
        "verdict_after": None,
        "precision": None,
        "npu_only": True,
        "source": p.source,
        "note": p.note,
        "expect": p.expect,
    }


Side = Callable[[Path, bool], Sample]  # (the run's folder, the fix applied?) -> the run


def run_pair(
    pair: Pair, side: Side, fires: Callable[[Sample], bool], runs: Path, repeat: int, say: Callable[[str], None]
) -> Outcome | str:
    """The baseline once: does the finding fire? Then baseline and fix ``repeat`` times each, interleaved (the
    first baseline run counts as the first of its side). A string: why the pair was skipped."""

    def folder(label: str, i: int) -> Path:
        return prepare_output_dir(runs / pair.name / f"{label}-{i}")

    started = time.monotonic()
    first = side(folder("before", 1), False)
    if not fires(first):
        return f'its finding did not fire on this workload: the baseline says "{first.verdict}"'
    before, after = [first], []
    for i in range(1, repeat + 1):
        if i > 1:
            before.append(side(folder("before", i), False))
        after.append(side(folder("after", i), True))
        say(
            f"  [{pair.name}] {i}/{repeat}: before {before[-1].value:,.2f} {pair.unit}, after "
            f"{after[-1].value:,.2f} {pair.unit} ({time.monotonic() - started:.0f} s)"
        )
    return Outcome(pair, before, after)


def check_repeat(text: str) -> int:
    """--repeat: an integer in 1..MAX_REPEAT."""
    if not text.isdigit() or not 1 <= int(text) <= MAX_REPEAT:
        raise LabError(
            f"--repeat {text!r} is not an integer in 1..{MAX_REPEAT}",
            f"e.g. --repeat {DEFAULT_REPEAT} (at least 3 for a range worth reading)",
        )
    return int(text)


def main(argv: list[str] | None = None) -> int:
    from common.modes.fix.report import write_outputs
    from common.modes.fix.workloads import plan

    import argparse

    parser = argparse.ArgumentParser(prog="nox -s fix --", description=__doc__.strip().splitlines()[0])
    parser.add_argument("device", nargs="?", default="0", help="NPU device id (the NPU-only pairs need one)")
    parser.add_argument(
        "--repeat", default=str(DEFAULT_REPEAT), help=f"runs per side, 1..{MAX_REPEAT} (default {DEFAULT_REPEAT})"
    )
    parser.add_argument(
        "--workload", metavar="FILE", help="your model file (docs/own_model.md): the pairs whose finding fires on it"
    )
    parser.add_argument("--pairs", help=f"a comma-separated subset of {','.join(p.name for p in PAIRS)}")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    repeat = check_repeat(args.repeat)
    names = [p.name for p in PAIRS]
    chosen = [n.strip() for n in args.pairs.split(",")] if args.pairs else names
    if unknown := [n for n in chosen if n not in names]:
        raise LabError(f"--pairs: no pair named {', '.join(unknown)}", f"choose from {', '.join(names)}")
    out = prepare_output_dir(check_output_dir(OUT))
    sides, skipped = plan(args.workload, set(chosen), out / "models", DDP_RUNS)
    outcomes, failed = [], []
    for pair in (p for p in PAIRS if p.name in chosen and p.name not in skipped):
        side, fires = sides[pair.name]
        print(f"[{pair.name}] {pair.finding} -> {pair.fix}", flush=True)
        try:
            result = run_pair(pair, side, fires, out / "runs", repeat, lambda line: print(line, flush=True))
        except LabError as err:
            skipped[pair.name] = f"it failed: {err}"
            failed.append(pair.name)
            print(f"  [{pair.name}] failed: {err}", flush=True)
            continue
        if isinstance(result, str):
            skipped[pair.name] = result
            print(f"  [{pair.name}] skipped: {result}", flush=True)
        else:
            outcomes.append(result)
    print(write_outputs(out, [pair_json(o) for o in outcomes], skipped, args.workload, repeat))
    return 1 if failed else 0  # a finding that did not fire, or a fix within noise, is an answer, not a failure


if __name__ == "__main__":
    run_cli(main)
