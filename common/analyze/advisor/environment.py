"""Environment variables the capture recorded, judged as msprof-analyze's advisor judges them.

The advisor (``advisor/analyzer/overall/environment_variable_checker.py``, texts in
``rules/en/environment_variable_info.yaml``) reads ``ENV_VARIABLES`` of profiler_metadata.json and
flags each variable by its own condition (below); a variable the capture did not record is not judged.
"""

from __future__ import annotations

from common.analyze.advisor import Finding, clear, found, not_run

RULE = "Environment Variable Issues"
SOURCE = "msprof-analyze advisor overall/environment_variable_checker.py (ENV_SUGGEST_CONDITION)"


def _int(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        return 0


# name -> (flagged when, what it does, what to set): the advisor's conditions; the remedies from its yaml's gist
CONDITIONS = {
    "ASCEND_GLOBAL_LOG_LEVEL": (
        lambda v: v != "" and _int(v) != 3,
        "log level below WARNING (3) logs on the hot path",
        "export ASCEND_GLOBAL_LOG_LEVEL=3",
    ),
    "HCCL_RDMA_TC": (lambda v: v != "", "RDMA traffic class set by hand", "unset it unless the network team chose it"),
    "HCCL_RDMA_SL": (lambda v: v != "", "RDMA service level set by hand", "unset it unless the network team chose it"),
    "ACLNN_CACHE_LIMIT": (
        lambda v: v == "" or _int(v) < 10000,
        "aclnn operator cache smaller than 10000 entries",
        "export ACLNN_CACHE_LIMIT=100000 when aclnn launches are host-bound",
    ),
    "HOST_CACHE_CAPACITY": (
        lambda v: v == "" or _int(v) == 0,
        "dynamic-shape host cache off",
        "export HOST_CACHE_CAPACITY=20 for dynamic-shape models",
    ),
    "PYTORCH_NPU_ALLOC_CONF": (
        lambda v: "expandable_segments:True" not in v,
        "the caching allocator without expandable segments (fragmentation, Malloc calls)",
        "export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True",
    ),
    "ASCEND_LAUNCH_BLOCKING": (
        lambda v: v != "" and _int(v) == 1,
        "every launch synchronous (a debugging switch)",
        "unset ASCEND_LAUNCH_BLOCKING",
    ),
    "HCCL_ALGO": (lambda v: v != "", "HCCL algorithm forced by hand", "unset it unless measured better"),
}
THRESHOLD = (
    "ACLNN_CACHE_LIMIT unset or < 10000; HOST_CACHE_CAPACITY unset or 0; PYTORCH_NPU_ALLOC_CONF without "
    "expandable_segments:True; ASCEND_GLOBAL_LOG_LEVEL set and not 3; ASCEND_LAUNCH_BLOCKING=1; HCCL_RDMA_TC, "
    f"HCCL_RDMA_SL or HCCL_ALGO set ({SOURCE})"
)


def environment(rank) -> Finding:
    if rank.env is None:
        return not_run(
            RULE,
            "the capture recorded no environment (torch_npu writes ENV_VARIABLES into "
            "profiler_metadata.json; the lab's run_info.json records it as environment)",
            THRESHOLD,
        )
    if rank.backend == "portable":
        return not_run(
            RULE,
            f"a portable run: these variables act on CANN and torch_npu only (recorded in "
            f"{rank.env_source}; a run on an NPU is judged)",
            THRESHOLD,
        )
    flagged = [
        [name, rank.env[name] or "(unset)", what, fix]
        for name, (fires, what, fix) in CONDITIONS.items()
        if name in rank.env and fires(rank.env[name])
    ]
    if not flagged:
        judged = sum(1 for name in CONDITIONS if name in rank.env)
        return clear(RULE, f"{judged} recorded variable(s) judged, none flagged ({rank.env_source})", THRESHOLD)
    names = ", ".join(r[0] for r in flagged)
    return found(
        RULE,
        f"{len(flagged)} variable(s) to set: {names} (recorded in {rank.env_source})",
        THRESHOLD,
        remedy="; ".join(r[3] for r in flagged),
        figures={"variables": [r[0] for r in flagged]},
        header=["Variable", "Value", "Why", "Set"],
        rows=flagged,
    )
