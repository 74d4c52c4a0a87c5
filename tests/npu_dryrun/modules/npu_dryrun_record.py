# TEST DOUBLE for the NPU dry run (tests/npu_dryrun): never used outside the tests.
"""The call log every stand-in appends to, and the device rules they share.

``NPU_DRYRUN_LOG`` names ``calls.jsonl``: one JSON object per line,
``{"tool", "call", "args", "env", "pid", "ppid", "rc"}`` (+ ``under``: the msprof collection a
program runs in). ``env`` holds the variables the lab set that change what a real tool does
(ASCEND_RT_VISIBLE_DEVICES, RANK, ASCEND_PROCESS_LOG_PATH, ...), only when set.
"""

from __future__ import annotations

import fcntl
import json
import os

LOG_VAR = "NPU_DRYRUN_LOG"
DEVICES_VAR = "NPU_DRYRUN_DEVICES"  # how many logical devices the stand-in machine has (default 8)
SOC_VAR = "NPU_DRYRUN_CHIP"  # chip Name in npu-smi's table (default 910B3)
ENV_KEYS = (
    "ASCEND_RT_VISIBLE_DEVICES",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "ASCEND_PROCESS_LOG_PATH",
    "ASCEND_GLOBAL_LOG_LEVEL",
)  # CANN's log folder and level (runlogs.py)
UNDER_VAR = "NPU_DRYRUN_UNDER"  # set by msprof / msprof op for the program they run: which collection it is in

# aclError values (CANN acl_base.h / acl_rt.h) the stand-ins return when they refuse a call.
ACL_SUCCESS = 0
ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_UNINITIALIZE = 100001
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_ERROR_RT_PARAM_INVALID = 107000
ACL_ERROR_RT_INVALID_DEVICEID = 107001
ACL_ERROR_PROFILING_FAILURE = 500005


def physical_count() -> int:
    return int(os.environ.get(DEVICES_VAR) or 8)


def logical_count() -> int:
    """Logical devices the runtime numbers 0..N-1: ASCEND_RT_VISIBLE_DEVICES narrows them, as in CANN."""
    visible = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
    if visible is None:
        return physical_count()
    ids = [x.strip() for x in visible.split(",") if x.strip()]
    ok = [int(x) for x in ids if x.isdigit() and int(x) < physical_count()]
    return len(ok)


def env_of() -> dict[str, str]:
    return {k: os.environ[k] for k in ENV_KEYS if k in os.environ}


def record(tool: str, call: str, args: list | tuple = (), rc: int | None = None, **extra: object) -> None:
    """Append one call to calls.jsonl (a no-op when no log is named); lines from many processes never mix."""
    path = os.environ.get(LOG_VAR)
    if not path:
        return
    entry = {"tool": tool, "call": call, "args": list(args), "env": env_of(), "pid": os.getpid(), "ppid": os.getppid()}
    if os.environ.get(UNDER_VAR):
        entry["under"] = os.environ[UNDER_VAR]
    if rc is not None:
        entry["rc"] = rc
    entry.update(extra)
    line = json.dumps(entry, default=str) + "\n"
    with open(path, "a", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(line)
        f.flush()
        fcntl.flock(f, fcntl.LOCK_UN)


def read_calls(path: str | None = None) -> list[dict]:
    path = path or os.environ.get(LOG_VAR)
    if not path or not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
