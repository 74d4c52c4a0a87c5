"""msprof-analyze's own database output: ``cluster_analysis.db``, read as its CSV would be."""

from __future__ import annotations

from pathlib import Path

from common.formats.sqlite_file import SqliteFile

CLUSTER_ANALYSIS_DB = "cluster_analysis.db"  # what `msprof-analyze cluster` writes for database input
_CLUSTER_STEP_COLUMNS = {
    "step": "Step",
    "type": "Type",
    "index": "Index",
    "computing": "Computing",
    "communication_not_overlapped": "Communication(Not Overlapped)",
    "overlapped": "Overlapped",
    "communication": "Communication",
    "free": "Free",
    "stage": "Stage",
    "bubble": "Bubble",
    "communication_not_overlapped_and_exclude_receive": "Communication(Not Overlapped and Exclude Receive)",
    "preparing": "Preparing",
}


def read_cluster_step_trace_time(path: Path | str) -> list[dict[str, str]]:
    """``ClusterStepTraceTime`` of msprof-analyze's cluster_analysis.db as rows of its cluster_step_trace_time.csv.

    Given database exports, ``msprof-analyze cluster`` writes this table instead of the CSV; the rows
    come back under the CSV's column names, values as text, so one comparison reads either.
    """
    file = SqliteFile(path, "msprof-analyze cluster")
    file.require({"ClusterStepTraceTime": ("step", "type", "index")})
    present = [c for c in _CLUSTER_STEP_COLUMNS if c in file.schema["ClusterStepTraceTime"]]
    quoted = ", ".join(f'"{c}"' for c in present)  # "index" is an SQL keyword
    rows = file.query(f"SELECT {quoted} FROM ClusterStepTraceTime")
    return [{_CLUSTER_STEP_COLUMNS[c]: "" if v is None else str(v) for c, v in zip(present, row)} for row in rows]
