"""Exact column lists of the files the lab reads and writes.

Writers use the best-attested set, CANN 8.5 + torch_npu 7.1–7.3 on Atlas A2 with
``--aic-metrics=PipeUtilization``; readers also accept the other versions through ALIASES.
"""

from __future__ import annotations

# --- msprof: PROF_*/mindstudio_profiler_output/<name>_<14-digit ts>.csv ---------------------------
OP_SUMMARY_BASE = [
    "Device_id",
    "Model ID",
    "Task ID",
    "Stream ID",
    "Op Name",
    "OP Type",
    "OP State",
    "Task Type",
    "Task Start Time(us)",
    "Task Duration(us)",
    "Task Wait Time(us)",
    "Block Dim",
    "Mix Block Dim",
    "HF32 Eligible",
    "Input Shapes",
    "Input Data Types",
    "Input Formats",
    "Output Shapes",
    "Output Data Types",
    "Output Formats",
    "Context ID",
]
PMU_AIC = [
    "aicore_time(us)",
    "aic_total_cycles",
    "aic_mac_time(us)",
    "aic_mac_ratio",
    "aic_scalar_time(us)",
    "aic_scalar_ratio",
    "aic_mte1_time(us)",
    "aic_mte1_ratio",
    "aic_mte2_time(us)",
    "aic_mte2_ratio",
    "aic_fixpipe_time(us)",
    "aic_fixpipe_ratio",
    "aic_icache_miss_rate",
]
PMU_AIV = [
    "aiv_time(us)",
    "aiv_total_cycles",
    "aiv_vec_time(us)",
    "aiv_vec_ratio",
    "aiv_scalar_time(us)",
    "aiv_scalar_ratio",
    "aiv_mte2_time(us)",
    "aiv_mte2_ratio",
    "aiv_mte3_time(us)",
    "aiv_mte3_ratio",
    "aiv_icache_miss_rate",
]
PMU_COLUMNS = PMU_AIC + PMU_AIV + ["cube_utilization(%)"]
# The four AI Vector pipes PipeUtilization reports (aiv_<pipe>_ratio), by their short names.
AIV_PIPES = tuple(c.removeprefix("aiv_").removesuffix("_ratio") for c in PMU_AIV if c.endswith("_ratio"))
OP_SUMMARY = OP_SUMMARY_BASE + PMU_COLUMNS

OP_STATISTIC = [
    "Device_id",
    "OP Type",
    "Core Type",
    "Count",
    "Total Time(us)",
    "Min Time(us)",
    "Avg Time(us)",
    "Max Time(us)",
    "Ratio(%)",
]
API_STATISTIC = ["Device_id", "Level", "API Name", "Time(us)", "Count", "Avg(us)", "Min(us)", "Max(us)", "Variance"]
TASK_TIME = [
    "Device_id",
    "kernel_name",
    "kernel_type",
    "stream_id",
    "task_id",
    "task_time(us)",
    "task_start(us)",
    "task_stop(us)",
]

# --- torch_npu: *_ascend_pt/ASCEND_PROFILER_OUTPUT/ ------------------------------------------------
_KERNEL_RENAMES = {
    "Op Name": "Name",
    "OP Type": "Type",
    "Task Type": "Accelerator Core",
    "Task Start Time(us)": "Start Time(us)",
    "Task Duration(us)": "Duration(us)",
    "Task Wait Time(us)": "Wait Time(us)",
}
KERNEL_DETAILS = ["Step Id"] + [_KERNEL_RENAMES.get(c, c) for c in OP_SUMMARY]
STEP_TRACE_TIME = [
    "Device_id",
    "Step",
    "Computing",
    "Communication(Not Overlapped)",
    "Overlapped",
    "Communication",
    "Free",
    "Stage",
    "Bubble",
    "Communication(Not Overlapped and Exclude Receive)",
    "Preparing",
]

# Fields msprof writes with a trailing TAB so spreadsheets keep every digit.
TIMESTAMP_COLUMNS = frozenset({"Task Start Time(us)", "Start Time(us)", "task_start(us)", "task_stop(us)"})

# Names other versions use for the same column: canonical -> accepted alternatives.
ALIASES = {"Block Dim": ("Block Num",), "Mix Block Dim": ("Mix Block Num",), "Step Id": ("Step ID",)}

NA = "N/A"
MODEL_ID_SINGLE_OP = "4294967295"  # msprof's Model ID for eager / single-op work
