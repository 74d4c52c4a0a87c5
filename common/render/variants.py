"""Mode 03's comparison of its precision variants, laid out: the table, the converter's changes, the top ops."""

from __future__ import annotations

from common.analyze import families
from common.analyze.graph_changes import describe
from common.analyze.variants import VariantResult
from common.render import text


def render_variants(results: dict[str, VariantResult], backend_name: str, npu: bool, warmup: int, measured: int) -> str:
    """The variants side by side (Casts, top family, op time, accuracy, what the converter changed), what the
    converter changed in each, and each one's top ops."""
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
    changes = [f"  {name} ({'ATC' if npu else 'ONNX Runtime'}): {describe(r.changes)}" for name, r in results.items()]
    return "\n".join(
        [
            f"Backend: {backend_name} — {warmup} warm-up + {measured} measured executes per variant "
            "(accuracy: the output furthest into its tolerance; fusions: what the converter changed)",
            text.render_table(header, rows),
            "What changed between the exported graph and the graph that ran (the variant's fp16 conversion and the "
            "converter together: fusions, folds, ops added or removed):",
            *changes,
            "Top ops by share of op time:",
            *top,
        ]
    )
