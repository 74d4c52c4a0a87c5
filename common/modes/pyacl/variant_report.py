"""What one profiled variant gave, and the table that sets the variants side by side.

``VariantResult`` is everything the checks and the report need about one variant, read back
from disk; ``file_verdict`` and ``graph_count_verdict`` check its files and its counts against its
built graph; ``explain`` turns the Cast figures into sentences, ``render`` prints the comparison
table (the graph changes named in its fusions column) and each variant's top ops; ``summary``
is what run_info.json keeps of it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from common.analyze.graph_changes import Change, describe
from common.modes.pyacl.variants import MEASURED, WARMUP, Variant

from common.analyze import checks, families
from common.backend import Backend
from common.errors import LabError
from common.formats import schema
from common.formats.records import OpStat, Task
from common.formats.table import read_table
from common.render import text
from common.verdict import Verdict

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
    metrics: dict[str, float]  # accuracy against the fp32 reference, all outputs together
    outputs: list[dict]  # per output: name, max/mean abs diff, cosine, scale (max |reference|), tol
    files: dict[str, Path]
    window: str  # how the measured window was cut, in words
    window_ok: bool
    raw_profile: Path | None = None
    changes: list[Change] = field(default_factory=list)  # the converter's, named
    notes: list[str] = field(default_factory=list)

    def per_execute(self, op_type: str) -> float:
        return sum(1 for t in self.tasks if t.op_type == op_type) / MEASURED

    def share(self, family: str) -> float:
        return families.family_share(self.stats).get(family, 0.0)

    def execute_us(self) -> float:
        return sum(t.duration_us for t in self.tasks) / MEASURED

    def top_family(self) -> tuple[str, float]:
        shares = families.family_share(self.stats, ("init",))
        top = max(shares, key=shares.get) if shares else "none"
        return top, shares.get(top, 0.0)

    def worst_output(self) -> dict:
        """The output closest to (or furthest past) its tolerance."""
        return max(self.outputs, key=lambda o: o["max_abs_diff"] / o["tol"] if o["tol"] else float("inf"))


def file_verdict(variant: Variant, files: dict[str, Path], npu: bool) -> Verdict:
    """Both files exist, have rows, and carry the columns msprof writes (all of them, on portable)."""
    parts, ok = [], True
    npu_columns = ["Op Name", "OP Type", "Task Type", "Task Start Time(us)", "Task Duration(us)"]
    required = {"op_summary": npu_columns if npu else schema.OP_SUMMARY, "op_statistic": schema.OP_STATISTIC}
    for name, columns in required.items():
        try:
            rows = len(read_table(files[name], columns, "msprof / this mode"))
        except LabError as err:
            ok, rows = False, f"error: {err}"
        ok &= isinstance(rows, int) and rows > 0
        parts.append(f"{files[name].name} {len(columns)} columns, {rows} rows")
    return Verdict(f"files and columns ({variant.name})", ok, "; ".join(parts))


def graph_count_verdict(result: VariantResult) -> Verdict:
    """Each op type runs per execute exactly as often as the built graph holds it."""
    name = f"op counts per execute match the graph ({result.variant.name})"
    return checks.check_graph_counts(result.tasks, result.graph_counts, MEASURED, name)


def fallback_casts(result: VariantResult) -> float:
    ort_casts = [t for t in result.tasks if t.op_type == "Cast" and t.op_name.startswith(ORT_FALLBACK_CAST_PREFIX)]
    return len(ort_casts) / MEASURED


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
                f"  {fallback_casts(default):g} of them were added by ONNX Runtime, not by the fp16 conversion: "
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


def render(results: dict[str, VariantResult], backend: Backend) -> str:
    header = [
        "variant",
        "Cast/execute",
        "Cast share",
        "top family",
        "op time/execute (us)",
        "max abs diff",
        "tol",
        "cosine",
        "fusions",
    ]
    rows = []
    for name, r in results.items():
        family, share = r.top_family()
        worst = r.worst_output()
        rows.append(
            [
                name,
                r.per_execute("Cast"),
                f"{100 * r.share('cast'):.1f}%",
                f"{family} {100 * share:.1f}%",
                r.execute_us(),
                f"{worst['max_abs_diff']:.3g}",
                f"{worst['tol']:.2g}",
                f"{min(o['cosine'] for o in r.outputs):.6f}",
                describe(r.changes),
            ]
        )
    top = []
    for name, r in results.items():
        ops = ", ".join(f"{s.op_type} {s.ratio_pct:.1f}%" for s in families.top_ops(r.stats, 4))
        top.append(f"  {name}: {ops}")
    changes = [
        f"  {name} ({'ATC' if backend.is_npu else 'ONNX Runtime'}): {describe(r.changes)}"
        for name, r in results.items()
    ]
    return "\n".join(
        [
            f"Backend: {backend.name} — {WARMUP} warm-up + {MEASURED} measured executes per variant "
            "(accuracy: the output furthest into its tolerance; fusions: what the converter changed)",
            text.render_table(header, rows),
            "What the converter changed in the exported graph, named (fusions, folds, ops added or removed):",
            *changes,
            "Top ops by share of op time:",
            *top,
        ]
    )


def summary(results: dict[str, VariantResult], out: Path, npu: bool, models: dict[str, Path]) -> dict[str, dict]:
    """Per variant, what run_info.json records: model, Cast figures, accuracy, graph counts and changes, files."""
    return {
        name: {
            "model": str(models[name]),
            "cast_per_execute": r.per_execute("Cast"),
            "cast_share": r.share("cast"),
            "matmul_share": r.share("matmul"),
            "top_family": r.top_family()[0],
            "accuracy": r.metrics,
            "accuracy_per_output": r.outputs,
            "graph_op_counts": dict(r.graph_counts),
            "graph_changes": [{"stage": c.stage, "change": str(c), "family_delta": c.delta} for c in r.changes],
            "window": r.window,
            "files": {k: str(p.relative_to(out)) for k, p in r.files.items()},
        }
        for name, r in results.items()
    }
