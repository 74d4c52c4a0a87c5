"""Operator advisories on real captures: each rule with its threshold, fired (or not) by the rows named here."""

from __future__ import annotations

from helpers import FIXTURES

from common.analyze import advisories
from common.formats.datasets import find_datasets

NPU = FIXTURES / "npu"


def _tasks(folder: str):
    (ds,) = find_datasets(NPU / folder)
    return ds.tasks


def test_ai_cpu_casts_are_flagged_with_the_rows_and_the_rule() -> None:
    """msprof-analyze's test kernel_details: trans_Cast_5 / trans_Cast_18 on the AI CPU, INT32 -> UINT64."""
    advice = advisories.ai_cpu_ops(_tasks("torch_npu_aicpu_kernel_details"))
    assert advice is not None
    assert advice.rows == [["Cast", "AI_CPU", 4, 517.06, 197.54, 4.62, "INT32 -> UINT64"]]
    assert advice.text.startswith("4 task(s) ran on the AI CPU: 517.06 us, 4.6% of the compute task time; the "
                                  "longest, trans_Cast_5 (Cast), 197.54 us")
    assert "_MIN_TASK_DURATION = 20 us" in advice.rule


def test_ai_cpu_tasks_under_the_threshold_are_not_flagged() -> None:
    tasks = _tasks("torch_npu_aicpu_kernel_details")
    short = [t for t in tasks if t.task_type != "AI_CPU" or t.duration_us < advisories.AI_CPU_MIN_TASK_US]
    assert advisories.ai_cpu_ops(short) is None
    assert advisories.ai_cpu_ops(_tasks("torch_npu_kernel_details")) is None  # no AI_CPU row there


def test_transdata_overhead_on_the_msinsight_cnn() -> None:
    """57 TransData tasks (1,423.202 us) + 4 Cast of 8,873.737 us of compute: 16.1%, over the 10% estimate."""
    advice = advisories.conversions(_tasks("msinsight_torch_npu/text_level1/rank0_ascend_pt"))
    assert advice is not None and "estimate" in advice.rule
    assert [r[:4] for r in advice.rows] == [["TransData", "AI_VECTOR_CORE", 57, 1423.202],
                                             ["Cast", "AI_VECTOR_CORE", 4, 5.78]]
    assert "61 Cast / TransData task(s): 1,428.98 us, 16.1% of the compute task time" in advice.text
    assert advisories.conversions(_tasks("torch_npu_kernel_details")) is None
