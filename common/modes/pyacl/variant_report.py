"""What the run of mode 03 keeps of each variant: its files checked (columns and rows), its counts against the graph,
and what run_info.json records of it. The record itself is common.analyze.variants.VariantResult, the table
common.render.variants."""

from __future__ import annotations

from pathlib import Path

from common.analyze.variants import VariantResult
from common.modes.pyacl.variants import MEASURED

from common.analyze import checks
from common.formats import schema
from common.formats.table import rows_or_error
from common.verdict import Verdict


def file_verdict(name: str, files: dict[str, Path], npu: bool) -> Verdict:
    """Variant ``name``'s op_summary and op_statistic: the columns msprof writes (all of them, on portable), their
    rows counted (common.formats.table) and judged (common.analyze.checks.check_variant_files)."""
    npu_columns = ["Op Name", "OP Type", "Task Type", "Task Start Time(us)", "Task Duration(us)"]
    required = {"op_summary": npu_columns if npu else schema.OP_SUMMARY, "op_statistic": schema.OP_STATISTIC}
    found = [
        (files[kind].name, len(columns), rows_or_error(files[kind], columns, "msprof / this mode"))
        for kind, columns in required.items()
    ]
    return checks.check_variant_files(name, found)


def graph_count_verdict(result: VariantResult) -> Verdict:
    """Each op type runs per execute exactly as often as the built graph holds it."""
    name = f"op counts per execute match the graph ({result.name})"
    return checks.check_graph_counts(result.tasks, result.graph_counts, MEASURED, name)


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
