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
    assert advice.text.startswith(
        "4 task(s) ran on the AI CPU: 517.06 us, 4.6% of the compute task time; the "
        "longest, trans_Cast_5 (Cast), 197.54 us"
    )
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
    assert [r[:4] for r in advice.rows] == [
        ["TransData", "AI_VECTOR_CORE", 57, 1423.202],
        ["Cast", "AI_VECTOR_CORE", 4, 5.78],
    ]
    assert "61 Cast / TransData task(s): 1,428.98 us, 16.1% of the compute task time" in advice.text
    assert advisories.conversions(_tasks("torch_npu_kernel_details")) is None


def test_dynamic_shapes_on_the_msinsight_cnn() -> None:
    """Every compute task of the Level1 text export has OP State 'dynamic' (the 4 HCCL rows: N/A)."""
    advice = advisories.dynamic_shapes(_tasks("msinsight_torch_npu/text_level1/rank0_ascend_pt"))
    assert advice is not None and "is_dynamic_shape" in advice.rule
    assert advice.text.startswith(
        "all 187 compute tasks (33 OP Types, 8,873.74 us) ran as dynamic-shape kernels; "
        "15 OP Type(s) saw more than one input shape"
    )
    assert advice.rows[:2] == [
        ["ForeachAddList", "AI_VECTOR_CORE", 3, 1959.079, 22.08, 1],
        ["TransData", "AI_VECTOR_CORE", 57, 1423.202, 16.04, 30],
    ]


def test_dynamic_shapes_not_flagged_with_a_static_op_or_without_op_state() -> None:
    # the advisor's rule is "no static op": one static task is enough (the same real tasks, one relabelled)
    tasks = _tasks("msinsight_torch_npu/text_level1/rank0_ascend_pt")
    tasks[0].op_state = advisories.STATIC_STATE
    assert advisories.dynamic_shapes(tasks) is None
    # an older kernel_details has no OP State column: nothing to judge
    assert advisories.dynamic_shapes(_tasks("torch_npu_aicpu_kernel_details")) is None


def test_low_block_dim_on_the_msinsight_cnn() -> None:
    """Cores estimated from the data: AIC 24 (11 AI_CORE tasks use 24), AIV 48 (54 use 48)."""
    advice = advisories.low_block_dim(_tasks("msinsight_torch_npu/text_level1/rank0_ascend_pt"))
    assert advice is not None and "block_dim % core_num" in advice.rule and "AIC 24, AIV 48" in advice.rule
    assert advice.text.startswith("54 task(s), 3,152.60 us (35.5% of the compute task time)")
    assert advice.rows[:2] == [
        ["TransData", "AI_VECTOR_CORE", 33, 1064.102, 70.801, 11.99, "32, 39, 43", 48],
        ["Conv2D", "AI_CORE", 5, 723.434, 313.886, 8.15, "16", 24],
    ]


def test_low_block_dim_not_flagged() -> None:
    # AIV 48 estimated; the tasks off a multiple of 48 (Block Dim 2, 4, 9, 33) all run under 20 us
    assert advisories.low_block_dim(_tasks("torch_npu_aicpu_kernel_details")) is None
    # 2 tasks: too few to estimate a core count
    assert advisories.low_block_dim(_tasks("cann85_minimal")) is None


def test_launch_bound_on_the_msinsight_level0_rank1() -> None:
    """27.0% of the device timeline free; 83 of 187 compute blocks waited > 0.2 x their own time for launch."""
    advice = advisories.launch_bound(_tasks("msinsight_torch_npu/text_level0/rank1_ascend_pt"))
    assert advice is not None and "SMALL_OP_NUM_RATIO = 0.2" in advice.rule
    assert advice.text.startswith(
        "the device was free 27,173.25 us of 100,602.25 us (27.0%); 83 of 187 compute blocks (44%)"
    )
    assert advice.rows[0][:3] == ["aclnnAddmm_MatMulCommon_MatMulV2", "N/A", 3]


def test_launch_bound_needs_both_free_time_and_small_ops() -> None:
    # rank 0's Level1 step: 83 of 187 blocks small, but Free is 18.8% of the timeline (step_trace_time: 25,744.05 us
    # of 136,581 us), under 20%
    assert advisories.launch_bound(_tasks("msinsight_torch_npu/text_level1/rank0_ascend_pt")) is None
    # the GPT step: 48 of 58 blocks small, but the device is free 6.7% of the time
    assert advisories.launch_bound(_tasks("torch_npu_aicpu_kernel_details")) is None
