"""What one profiled variant gave, and the table that sets the variants side by side.

``VariantResult`` is everything the checks and the report need about one variant, read back
from disk; ``explain`` turns the Cast figures into sentences, ``render`` prints the comparison
table and each variant's top ops; ``summary`` is what run_info.json keeps of it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from variants import MEASURED, WARMUP, Variant

from common.analyze import families
from common.backend import Backend
from common.formats.records import OpStat, Task
from common.render import text

# The original demo's figures on an Atlas 910B3 (ATC default policy), quoted for comparison only:
# measured elsewhere, not by this lab.
REFERENCE_910B3_SHARE_PCT = {"MatMulV2": 42.0, "Gelu": 29.4, "Cast": 28.6}
# ONNX Runtime names the Casts it adds to run an fp16 node on an fp32-only CPU kernel this way.
ORT_FALLBACK_CAST_PREFIX = "InsertedPrecisionFreeCast"


@dataclass
class VariantResult:
    """Everything the checks and the report need about one variant, read back from disk."""

    variant: Variant
    tasks: list[Task]  # measured executes only
    stats: list[OpStat]  # op_statistic of those tasks
    graph_counts: Counter  # compute ops by type in the built model file
    metrics: dict[str, float]  # accuracy against the fp32 reference
    files: dict[str, Path]
    window: str  # how the measured window was cut, in words
    window_ok: bool
    raw_profile: Path | None = None
    notes: list[str] = field(default_factory=list)

    def per_execute(self, op_type: str) -> float:
        return sum(1 for t in self.tasks if t.op_type == op_type) / MEASURED

    def share(self, family: str) -> float:
        return families.family_share(self.stats).get(family, 0.0)

    def execute_us(self) -> float:
        return sum(t.duration_us for t in self.tasks) / MEASURED


def fallback_casts(result: VariantResult) -> float:
    ort_casts = [t for t in result.tasks if t.op_type == "Cast" and t.op_name.startswith(ORT_FALLBACK_CAST_PREFIX)]
    return len(ort_casts) / MEASURED


def explain(results: dict[str, VariantResult], npu: bool) -> list[str]:
    """Sentences derived from the numbers: what the comparison shows on this backend."""
    lines = []
    default, fp16_io = results.get("default"), results.get("fp16-io")
    if default:
        lines.append(
            f"default: {default.per_execute('Cast'):g} Cast per execute take {100 * default.share('cast'):.1f}% "
            f"of op time (reference from elsewhere, ATC default on a 910B3: "
            f"Cast {REFERENCE_910B3_SHARE_PCT['Cast']}%)."
        )
        if not npu and fallback_casts(default):
            lines.append(
                f"  {fallback_casts(default):g} of them were added by ONNX Runtime, not by the fp16 conversion: "
                "its CPU provider has no fp16 Gemm/Erf kernels, so it runs those nodes in fp32 and casts "
                "the fp16 weights and constants up on every execute. This backend pays for the policy "
                "without computing in fp16."
            )
    if default and fp16_io:
        removed = default.per_execute("Cast") - fp16_io.per_execute("Cast")
        if removed > 0:
            lines.append(f"fp16-io: {removed:g} fewer Cast per execute than default, as the textbook says.")
        else:
            why = (
                "ONNX Runtime's CPU fallback turns the fp16 input back into fp32 with a Cast of its own, "
                "so feeding fp16 moves the boundary Cast instead of removing it. On an NPU, which has "
                "fp16 kernels, --input_fp16_nodes / --output_type=FP16 remove it."
                if not npu
                else "ATC kept Casts; check that --input_fp16_nodes names the model's input."
            )
            lines.append(f"fp16-io: {fp16_io.per_execute('Cast'):g} Cast per execute, not fewer than default: " + why)
    return lines


def render(results: dict[str, VariantResult], backend: Backend) -> str:
    header = [
        "variant",
        "Cast/execute",
        "Cast share",
        "MatMul share",
        "op time/execute (us)",
        "max abs diff",
        "mean abs diff",
        "cosine",
    ]
    rows = [
        [
            name,
            r.per_execute("Cast"),
            f"{100 * r.share('cast'):.1f}%",
            f"{100 * r.share('matmul'):.1f}%",
            r.execute_us(),
            f"{r.metrics['max_abs_diff']:.3g}",
            f"{r.metrics['mean_abs_diff']:.3g}",
            f"{r.metrics['cosine']:.6f}",
        ]
        for name, r in results.items()
    ]
    top = []
    for name, r in results.items():
        ops = ", ".join(f"{s.op_type} {s.ratio_pct:.1f}%" for s in families.top_ops(r.stats, 4))
        top.append(f"  {name}: {ops}")
    return "\n".join(
        [
            f"Backend: {backend.name} — {WARMUP} warm-up + {MEASURED} measured executes per variant",
            text.render_table(header, rows),
            "Top ops by share of op time:",
            *top,
        ]
    )


def summary(results: dict[str, VariantResult], out: Path, npu: bool) -> dict[str, dict]:
    """Per variant, what run_info.json records: model, Cast figures, accuracy, graph counts, files."""
    return {
        name: {
            "model": str(r.variant.model_path(npu)),
            "cast_per_execute": r.per_execute("Cast"),
            "cast_share": r.share("cast"),
            "matmul_share": r.share("matmul"),
            "accuracy": r.metrics,
            "graph_op_counts": dict(r.graph_counts),
            "window": r.window,
            "files": {k: str(p.relative_to(out)) for k, p in r.files.items()},
        }
        for name, r in results.items()
    }
