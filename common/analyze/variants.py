"""Mode 03's precision variants compared: what one profiled variant gave (a record the harness fills from the
variant's files) and what its Cast figures say, in sentences."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from common.analyze import families
from common.analyze.graph_changes import Change
from common.formats.records import OpStat, Task

# The original demo's figures on an Atlas 910B3 (ATC default policy), quoted for comparison only:
# measured elsewhere, not by this lab.
REFERENCE_910B3_SHARE_PCT = {"MatMulV2": 42.0, "Gelu": 29.4, "Cast": 28.6}
# ONNX Runtime names the Casts it adds to run an fp16 node on an fp32-only CPU kernel this way.
ORT_FALLBACK_CAST_PREFIX = "InsertedPrecisionFreeCast"


@dataclass
class VariantResult:
    """Everything the checks and the report need about one variant, read back from its files by the harness."""

    name: str  # the variant's: default, fp16-io, fp32
    fp16_compute: bool  # the converter computes in fp16
    executes: int  # measured executes
    tasks: list[Task]  # measured executes only
    stats: list[OpStat]  # op_statistic of those tasks
    graph_counts: Counter  # compute ops by type in the built model file
    metrics: dict[str, float]  # accuracy against the fp32 reference, all outputs together
    outputs: list[dict]  # per output: name, max/mean abs diff, cosine, scale (max |reference|), tol
    files: dict[str, Path]
    window: str  # how the measured window was cut, in words
    window_ok: bool
    raw_profile: Path | None = None
    changes: list[Change] = field(default_factory=list)  # the converter's, named
    notes: list[str] = field(default_factory=list)

    def per_execute(self, op_type: str) -> float:
        return sum(1 for t in self.tasks if t.op_type == op_type) / self.executes

    def share(self, family: str) -> float:
        return families.family_share(self.stats).get(family, 0.0)

    def execute_us(self) -> float:
        return sum(t.duration_us for t in self.tasks) / self.executes

    def top_family(self) -> tuple[str, float]:
        shares = families.family_share(self.stats, ("init",))
        top = max(shares, key=shares.get) if shares else "none"
        return top, shares.get(top, 0.0)

    def worst_output(self) -> dict:
        """The output closest to (or furthest past) its tolerance."""
        return max(self.outputs, key=lambda o: o["max_abs_diff"] / o["tol"] if o["tol"] else float("inf"))


def fallback_casts(result: VariantResult) -> float:
    ort_casts = [t for t in result.tasks if t.op_type == "Cast" and t.op_name.startswith(ORT_FALLBACK_CAST_PREFIX)]
    return len(ort_casts) / result.executes


def explain(
    results: dict[str, VariantResult], npu: bool, float_inputs: bool = True, tiny_mlp: bool = True
) -> list[str]:
    """Sentences derived from the numbers: what the comparison shows on this backend (``float_inputs``:
    whether the model has a floating-point input for fp16-io to feed in fp16; ``tiny_mlp``: the workload
    is TinyMLP, which the reference figure from elsewhere is about)."""
    lines = []
    default, fp16_io = results.get("default"), results.get("fp16-io")
    if default:
        reference = (
            f" (reference from elsewhere, TinyMLP with ATC's default on a 910B3: Cast "
            f"{REFERENCE_910B3_SHARE_PCT['Cast']}%)"
            if tiny_mlp
            else ""
        )
        lines.append(
            f"default: {default.per_execute('Cast'):g} Cast per execute take "
            f"{100 * default.share('cast'):.1f}% of op time{reference}."
        )
        if not npu and fallback_casts(default):
            lines.append(
                f"  {fallback_casts(default):g} of them were added by ONNX Runtime, "
                f"{default.per_execute('Cast') - fallback_casts(default):g} by the fp16 conversion: "
                "its CPU provider lacks fp16 kernels for some of the graph's ops, so it runs those nodes in fp32 "
                "and casts "
                "the fp16 weights and constants up on every execute. This backend pays for the policy "
                "without computing in fp16."
            )
    if default and fp16_io:
        removed = default.per_execute("Cast") - fp16_io.per_execute("Cast")
        if removed > 0:
            lines.append(f"fp16-io: {removed:g} fewer Cast per execute than default, as the textbook says.")
        else:
            if not float_inputs:
                why = "the model has no floating-point input, so fp16-io changes only its outputs' type."
            elif not npu:
                why = (
                    "ONNX Runtime's CPU fallback turns the fp16 input back into fp32 with a Cast of its own, "
                    "so feeding fp16 moves the boundary Cast instead of removing it. On an NPU, which has "
                    "fp16 kernels, --input_fp16_nodes / --output_type=FP16 remove it."
                )
            else:
                why = "ATC kept Casts; check that --input_fp16_nodes names every floating-point input."
            lines.append(f"fp16-io: {fp16_io.per_execute('Cast'):g} Cast per execute, not fewer than default: " + why)
    return lines
