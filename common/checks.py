"""Mode-level checks: verdicts over a whole ``prof_out/``, shared by the mode drivers."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from common import analysis
from common.analysis import Verdict
from common.errors import LabError
from common.profile import Dataset
from common.workload import compare_to_reference, reference_output

# fp32 on both sides: CPU runs match bit for bit; an NPU computing fp32 MatMul differs by
# rounding of the accumulation order only (~1e-6 relative, outputs here are ~0.02-0.1).
FP32_MAX_ABS = 1e-4
FP32_COSINE_MIN = 0.99999


def check_files(datasets: list[Dataset], names: list[str], where: str) -> Verdict:
    """Every named file exists in every dataset, parses with its columns, and has rows."""
    problems, seen = [], []
    for ds in datasets:
        for name in names:
            files = ds.files(name)
            if not files:
                problems.append(f"{ds.folder.name}: no {name} file")
                continue
            try:
                rows = _rows(ds, name)
            except LabError as err:
                problems.append(str(err))
                continue
            if rows == 0:
                problems.append(f"{files[0]}: no rows")
            seen.append(f"{name} {rows} rows")
    detail = "; ".join(problems) if problems else ", ".join(dict.fromkeys(seen))
    return Verdict(f"files present with expected columns ({where})", not problems, detail)


def _rows(ds: Dataset, name: str) -> int:
    from common.formats import readers

    reader = {
        "op_summary": readers.read_op_summary, "kernel_details": readers.read_kernel_details,
        "op_statistic": readers.read_op_statistic, "api_statistic": readers.read_api_statistic,
        "task_time": readers.read_task_time, "step_trace_time": readers.read_step_trace_time,
        "msprof": readers.read_trace, "trace_view": readers.read_trace,
    }[name]
    return sum(len(reader(path)) for path in ds.files(name))


def output_metrics(path: Path) -> dict[str, float] | None:
    """Accuracy of a saved model output (``output.npy``) against the fp32 reference; None if not written."""
    if not path.is_file():
        return None
    return compare_to_reference(np.load(path), reference_output())


def check_output_file(path: Path, where: str) -> Verdict:
    """The saved model output matches the fp32 reference (tolerances above)."""
    metrics = output_metrics(path)
    if metrics is None:
        return Verdict(f"output matches fp32 reference ({where})", False, f"{path} was not written")
    return analysis.check_output(metrics, where, FP32_MAX_ABS, FP32_COSINE_MIN)


def tasks_of(datasets: list[Dataset]) -> list:
    return [task for ds in datasets for task in ds.tasks]


def stats_of(datasets: list[Dataset]) -> list:
    return [row for ds in datasets for row in ds.op_statistic]
