"""Large synthetic profiles in msprof's and torch_npu's exact schema, quirks included.

The op mix is one decoder layer of a transformer served on an Atlas A2 (MatMul, FlashAttention,
RmsNorm, Swiglu, Add, Cast, TransData, AI_CPU and HCCL tasks), shapes and dtypes as msprof
prints them, the A2 ``PipeUtilization`` PMU block, timestamps with their trailing TAB,
triple-quoted shapes, ``N/A`` for missing values, ``4294967295`` as Model ID and msprof's
slicing past 1,000,000 rows (``op_summary_slice_{i}_{ts}.csv``). Text is assembled in polars
from a few numpy arrays, so a million rows take seconds, and each slice is built and written
on its own, so memory stays bounded however many rows are asked for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from common.formats import schema

SLICE_ROWS = 1_000_000  # msprof's CSV_LIMIT: a longer CSV is split into slices of this many rows
TIMESTAMP = "20260101000000"
PROF_DIR = "PROF_000001_20260101000000000_BENCHMARKPROFILE"
START_NS = 1_780_676_244_313_289_000
AIC_MHZ = 1800  # cycles = time(us) x MHz, as the PMU counts them
TASKS_PER_STEP = 1000
TASKS_PER_BUSY_RUN = 4  # back-to-back tasks between two gaps: one Computing event, then one Free


@dataclass(frozen=True)
class OpKind:
    """One kind of device task with its share of the task count and its msprof text."""

    op_type: str
    op_name: str
    task_type: str
    share: float
    mean_us: float
    block_dim: int
    mix_block_dim: int
    inputs: tuple[str, str, str]  # Input Shapes, Input Data Types, Input Formats (shapes unquoted)
    outputs: tuple[str, str, str]
    aic_ratios: tuple[float, ...] | None  # mac, scalar, mte1, mte2, fixpipe (time shares); None: no AIC work
    aiv_ratios: tuple[float, ...] | None  # vec, scalar, mte2, mte3


_MM = ("aic", (0.82, 0.47, 0.64, 0.96, 0.03))
# A table, a row per kind: laid out by hand.
# fmt: off
KINDS = [
    OpKind("MatMulV2", "aclnnMatmul_MatMulCommon_MatMulV2", "AI_CORE", 0.22, 185.5, 20, 0,
           ("8192,4096;4096,4096", "DT_BF16;DT_BF16", "ND;ND"), ("8192,4096", "DT_BF16", "ND"), _MM[1], None),
    OpKind("MatMulV3", "aclnnMatmul_MatMulV3Common_MatMulV3", "AI_CORE", 0.10, 402.0, 24, 0,
           ("8192,4096;4096,11008", "DT_BF16;DT_BF16", "ND;ND"), ("8192,11008", "DT_BF16", "ND"),
           (0.88, 0.31, 0.70, 0.91, 0.05), None),
    OpKind("FlashAttentionScore", "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore", "MIX_AIC",
           0.04, 410.2, 20, 40, ("4096,2,512;4096,2,512;4096,2,512;;;;4096,4096;;;;;", "DT_BF16;DT_BF16;DT_BF16;UINT8",
                                 "NCL;NCL;NCL;ND"), ("2,4,4096,8;2,4,4096,8;;4096,2,512", "FLOAT;FLOAT;DT_BF16;DT_BF16",
                                                     "ND;ND;ND;ND"), (0.35, 0.96, 0.30, 0.87, 0.59),
           (0.63, 0.38, 0.32, 0.20)),
    OpKind("RmsNorm", "aclnnRmsNorm_RmsNorm_RmsNorm", "AI_VECTOR_CORE", 0.08, 22.4, 40, 0,
           ("8192,4096;4096", "DT_BF16;DT_BF16", "ND;ND"), ("8192,4096;8192,1", "DT_BF16;FLOAT", "ND;ND"), None,
           (0.41, 0.12, 0.78, 0.22)),
    OpKind("Add", "aclnnAdd_AddAiCore_Add", "AI_VECTOR_CORE", 0.16, 26.8, 40, 0,
           ("512,2,4096;512,2,4096", "DT_BF16;DT_BF16", "NCL;NCL"), ("512,2,4096", "DT_BF16", "ND"), None,
           (0.25, 0.06, 0.84, 0.13)),
    OpKind("Mul", "aclnnMul_MulAiCore_Mul", "AI_VECTOR_CORE", 0.08, 24.1, 40, 0,
           ("8192,11008;8192,11008", "DT_BF16;DT_BF16", "ND;ND"), ("8192,11008", "DT_BF16", "ND"), None,
           (0.27, 0.05, 0.82, 0.15)),
    OpKind("Swiglu", "aclnnSwiGlu_SwiGlu_SwiGlu", "AI_VECTOR_CORE", 0.04, 61.7, 40, 0,
           ("8192,22016", "DT_BF16", "ND"), ("8192,11008", "DT_BF16", "ND"), None, (0.52, 0.09, 0.61, 0.30)),
    OpKind("Cast", "aclnnCast_CastAiCore_Cast", "AI_VECTOR_CORE", 0.08, 9.3, 32, 0,
           ("8192,4096", "FLOAT", "ND"), ("8192,4096", "DT_BF16", "ND"), None, (0.18, 0.07, 0.88, 0.41)),
    OpKind("Transpose", "aclnnPermute_TransposeAiCore_Transpose", "AI_VECTOR_CORE", 0.05, 31.0, 40, 0,
           ("4096,2,512", "DT_BF16", "ND"), ("2,4096,512", "DT_BF16", "ND"), None, (0.09, 0.21, 0.73, 0.69)),
    OpKind("TransData", "trans_TransData_12", "AI_VECTOR_CORE", 0.03, 15.0, 8, 0,
           ("4096,4096", "FLOAT16", "ND"), ("256,256,16,16", "FLOAT16", "FRACTAL_NZ"), None, (0.05, 0.33, 0.71, 0.66)),
    OpKind("GatherV2", "aclnnEmbedding_GatherV2AiCore_GatherV2", "AI_VECTOR_CORE", 0.02, 12.2, 40, 0,
           ("32000,4096;8192", "DT_BF16;INT64", "ND;ND"), ("8192,4096", "DT_BF16", "ND"), None,
           (0.02, 0.40, 0.55, 0.48)),
    OpKind("ZerosLike", "aclnnInplaceZero_ZerosLikeAiCore_ZerosLike", "AI_VECTOR_CORE", 0.03, 1.35, 8, 0,
           ("8192,4096", "DT_BF16", "ND"), ("8192,4096", "DT_BF16", "ND"), None, (0.01, 0.60, 0.00, 0.90)),
    OpKind("NonZero", "NonZero_NonZero", "AI_CPU", 0.01, 95.0, 0, 0,
           ("8192", "INT64", "ND"), ("8192,1", "INT64", "ND"), None, None),
    OpKind("hcom_allReduce_", "hcom_allReduce__445_0", "COMMUNICATION", 0.06, 308.9, 0, 0,
           ("", "", ""), ("", "", ""), None, None),
]
# fmt: on
_SHARES = np.array([k.share for k in KINDS]) / sum(k.share for k in KINDS)


def _fixed3(ns: pl.Expr) -> pl.Expr:
    """Integer nanoseconds as µs with exactly 3 decimals, as msprof prints them (values >= 0)."""
    ns = ns.round().cast(pl.Int64)
    return pl.format("{}.{}", ns // 1000, (ns % 1000).cast(pl.String).str.zfill(3))


def _rows(rng: np.random.Generator, n: int, first_task: int, start_ns: int) -> tuple[pl.DataFrame, int]:
    """``n`` tasks: kind, timing (integer ns) and step columns; returns them and where the next task may start."""
    kind = rng.choice(len(KINDS), size=n, p=_SHARES)
    mean_us = np.array([k.mean_us for k in KINDS])[kind]
    duration = np.maximum(1, np.round(rng.lognormal(np.log(mean_us), 0.25) * 1000)).astype(np.int64)
    index = np.arange(first_task, first_task + n)
    # Tasks run back to back in runs; each run ends with a gap (host launch latency), longer at step ends.
    gap = np.where(index % TASKS_PER_BUSY_RUN == TASKS_PER_BUSY_RUN - 1, rng.integers(2_000, 40_000, n), 0)
    gap = np.where(index % TASKS_PER_STEP == TASKS_PER_STEP - 1, gap + 500_000, gap).astype(np.int64)
    ends = start_ns + np.cumsum(duration + gap) - gap
    starts = ends - duration
    wait = np.concatenate([[0], gap[:-1]]).astype(np.int64)
    frame = pl.DataFrame(
        {
            "kind": kind.astype(np.int32),
            "task_id": (index % 65536).astype(np.int64),
            "start": starts,
            "dur": duration,
            "wait": wait,
            "step": (index // TASKS_PER_STEP + 1).astype(np.int64),
            "stream": (2 + kind % 3).astype(np.int64),
        }
    )
    return frame, int(ends[-1] + gap[-1])


def _kind_table() -> pl.DataFrame:
    """Per kind: the static text of its row and the PMU time shares."""

    def quoted(shapes: str) -> str:
        return f'"""{shapes}"""' if shapes else "N/A"

    rows = []
    for i, k in enumerate(KINDS):
        ins, outs = k.inputs, k.outputs
        middle = [
            str(k.block_dim),
            str(k.mix_block_dim),
            "NO",
            quoted(ins[0]),
            ins[1] or "N/A",
            ins[2] or "N/A",
            quoted(outs[0]),
            outs[1] or "N/A",
            outs[2] or "N/A",
            "N/A" if k.task_type != "MIX_AIC" else "0",
        ]
        rows.append(
            {
                "kind": i,
                "op_type": k.op_type,
                "op_name": k.op_name,
                "task_type": k.task_type,
                "middle": ",".join(middle),
                "aic": list(k.aic_ratios or ()),
                "aiv": list(k.aiv_ratios or ()),
                "pmu": k.task_type != "COMMUNICATION" and k.task_type != "AI_CPU",
            }
        )
    return pl.DataFrame(rows, schema_overrides={"kind": pl.Int32})


def _pmu_text(kinds: pl.DataFrame) -> pl.Expr:
    """The 25 PMU cells (A2 PipeUtilization): times scale with the task, ratios come from its kind."""
    parts: list[pl.Expr] = []
    aic_time = pl.col("dur") * 0.985
    aiv_time = pl.col("dur") * 0.97
    has_aic = pl.col("aic").list.len() > 0
    has_aiv = pl.col("aiv").list.len() > 0

    def block(has: pl.Expr, total: pl.Expr, ratios: str, count: int, tail_zeros: int) -> pl.Expr:
        cells = [_fixed3(total), (total * AIC_MHZ / 1000).round().cast(pl.Int64).cast(pl.String)]
        for j in range(count):
            share = pl.col(ratios).list.get(j, null_on_oob=True)
            cells += [_fixed3(total * share), _fixed3(share * 1000)]
        cells.append(pl.lit("0.00" + str(tail_zeros)))
        zeros = ",".join(["0"] * (2 + 2 * count + 1))
        return pl.when(has).then(pl.concat_str(cells, separator=",")).otherwise(pl.lit(zeros))

    parts.append(block(has_aic, aic_time, "aic", 5, 3))
    parts.append(block(has_aiv, aiv_time, "aiv", 4, 7))
    cube = pl.when(has_aic).then(_fixed3(pl.lit(100_000.0) * 0.985 * pl.col("aic").list.get(0, null_on_oob=True)))
    parts.append(cube.otherwise(pl.lit("0")))
    na = ",".join([schema.NA] * len(schema.PMU_COLUMNS))
    return pl.when(pl.col("pmu")).then(pl.concat_str(parts, separator=",")).otherwise(pl.lit(na))


def _lines(frame: pl.DataFrame, kinds: pl.DataFrame, step_column: bool) -> pl.DataFrame:
    """One msprof text line per task (op_summary order; kernel_details adds Step Id first)."""
    joined = frame.join(kinds, on="kind", how="left")
    cells = [
        pl.lit("0"),
        pl.lit(schema.MODEL_ID_SINGLE_OP),
        pl.col("task_id").cast(pl.String),
        pl.col("stream").cast(pl.String),
        pl.col("op_name"),
        pl.col("op_type"),
        pl.lit("dynamic"),
        pl.col("task_type"),
        pl.concat_str([_fixed3(pl.col("start")), pl.lit("\t")]),
        _fixed3(pl.col("dur")),
        _fixed3(pl.col("wait")),
        pl.col("middle"),
        _pmu_text(kinds),
    ]
    if step_column:
        cells.insert(0, pl.col("step").cast(pl.String))
    return joined.select(pl.concat_str(cells, separator=",").alias("line"))


def _write_lines(path: Path, header: list[str], lines: pl.DataFrame, append: bool = False) -> None:
    with path.open("ab" if append else "wb") as f:
        if not append:
            f.write((",".join(header) + "\n").encode())
        lines.write_csv(f, include_header=False, quote_style="never")


def write_op_summary(out: Path, rows: int, seed: int = 0, slice_rows: int = SLICE_ROWS) -> list[Path]:
    """``PROF_*/mindstudio_profiler_output/op_summary*.csv`` with ``rows`` tasks, sliced as msprof does."""
    folder = out / PROF_DIR / "mindstudio_profiler_output"
    folder.mkdir(parents=True, exist_ok=True)
    rng, kinds = np.random.default_rng(seed), _kind_table()
    sliced = rows > slice_rows
    paths, start, done = [], START_NS, 0
    for i in range((rows + slice_rows - 1) // slice_rows or 1):
        n = min(slice_rows, rows - done)
        name = f"op_summary_slice_{i}_{TIMESTAMP}.csv" if sliced else f"op_summary_{TIMESTAMP}.csv"
        frame, start = _rows(rng, n, done, start)
        _write_lines(folder / name, schema.OP_SUMMARY, _lines(frame, kinds, step_column=False))
        paths.append(folder / name)
        done += n
    return paths


def write_kernel_details(out: Path, rows: int, seed: int = 0, block_rows: int = SLICE_ROWS) -> Path:
    """``*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv``: one file (torch_npu does not slice it)."""
    folder = out / "bench_0_20260101000000000_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    folder.mkdir(parents=True, exist_ok=True)
    path, rng, kinds = folder / "kernel_details.csv", np.random.default_rng(seed), _kind_table()
    start, done = START_NS, 0
    while done < rows or done == 0:
        n = min(block_rows, rows - done)
        frame, start = _rows(rng, n, done, start)
        _write_lines(path, schema.KERNEL_DETAILS, _lines(frame, kinds, step_column=True), append=done > 0)
        done += n
        if n == 0:
            break
    return path


# --- trace_view.json ------------------------------------------------------------------------------
HOST_PID, HW_PID, OVERLAP_PID = 2871234, 287123401, 287123402
_METADATA = [
    f'{{"name":"process_name","pid":{HOST_PID},"tid":0,"ph":"M","args":{{"name":"Python"}}}}',
    f'{{"name":"process_labels","pid":{HOST_PID},"tid":0,"ph":"M","args":{{"labels":"CPU"}}}}',
    f'{{"name":"process_name","pid":{HW_PID},"tid":0,"ph":"M","args":{{"name":"Ascend Hardware"}}}}',
    f'{{"name":"process_labels","pid":{HW_PID},"tid":0,"ph":"M","args":{{"labels":"NPU 0"}}}}',
    f'{{"name":"process_name","pid":{OVERLAP_PID},"tid":0,"ph":"M","args":{{"name":"Overlap Analysis"}}}}',
    f'{{"name":"process_labels","pid":{OVERLAP_PID},"tid":0,"ph":"M","args":{{"labels":"NPU 0"}}}}',
] + [
    f'{{"name":"thread_name","pid":{OVERLAP_PID},"tid":{tid},"ph":"M","args":{{"name":"{name}"}}}}'
    for tid, name in enumerate(["Computing", "Communication", "Communication(Not Overlapped)", "Free"])
]
EVENTS_PER_TASK = 2 + 2 / TASKS_PER_BUSY_RUN
# profiler_info.json beside ASCEND_PROFILER_OUTPUT/: torch_npu's keys; what only a device run fills stays null.
PROFILER_INFO = {
    "config": {
        "common_config": {
            "activities": ["ProfilerActivity.CPU", "ProfilerActivity.NPU"],
            "schedule": {"wait": 0, "warmup": 0, "active": 1, "repeat": 1, "skip_first": 0},
            "record_shapes": True,
            "profile_memory": False,
            "with_stack": False,
            "with_flops": False,
            "with_modules": False,
        }
    },
    "start_info": None,
    "end_info": None,
    "torch_npu_version": None,
    "cann_version": None,
}  # host launch + device task, and per run one Computing + one Free


def _text(*parts: str | pl.Expr) -> pl.Expr:
    """One string column from literal text and expressions (JSON braces make ``pl.format`` unusable)."""
    return pl.concat_str([pl.lit(p) if isinstance(p, str) else p.cast(pl.String) for p in parts]).alias("line")


def _trace_block(frame: pl.DataFrame, kinds: pl.DataFrame) -> list[pl.DataFrame]:
    """Event lines for a block of tasks: the host's launches and the device tasks."""
    f = frame.join(kinds, on="kind", how="left")
    host = f.select(
        _text(
            '{"ph":"X","name":"aclnn',
            pl.col("op_type"),
            f'","pid":{HOST_PID},"tid":{HOST_PID},"ts":"',
            _fixed3(pl.col("start") - 30_000),
            '","dur":',
            _fixed3(pl.col("dur") // 10),
            ',"cat":"cpu_op","args":{"Sequence number":-1,"Fwd thread id":0}}',
        )
    )
    device = f.select(
        _text(
            '{"name":"',
            pl.col("op_name"),
            f'","pid":{HW_PID},"tid":',
            pl.col("stream"),
            ',"ts":"',
            _fixed3(pl.col("start")),
            '","dur":',
            _fixed3(pl.col("dur")),
            ',"args":{"Model Id":4294967295,"Task Type":"',
            pl.col("task_type"),
            '","Physic Stream Id":',
            pl.col("stream"),
            ',"Task Id":',
            pl.col("task_id"),
            ',"Batch Id":0,"Subtask Id":4294967295,"connection_id":',
            pl.col("task_id"),
            '},"ph":"X"}',
        )
    )
    return [host, device]


def _overlap(frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Busy runs (Computing), the gaps between them inside a step (Free), and the step ranges."""
    runs = (
        frame.with_columns(run=pl.int_range(pl.len()) // TASKS_PER_BUSY_RUN)
        .group_by("run", maintain_order=True)
        .agg(start=pl.col("start").min(), end=(pl.col("start") + pl.col("dur")).max(), step=pl.col("step").first())
    )
    steps = runs.group_by("step", maintain_order=True).agg(start=pl.col("start").min(), end=pl.col("end").max())
    free = (
        runs.with_columns(next_start=pl.col("start").shift(-1))
        .filter(pl.col("next_start").is_not_null())
        .select(start=pl.col("end"), dur=pl.col("next_start") - pl.col("end"), step=pl.col("step"))
        .join(steps.select("step", step_end="end"), on="step")
        .filter(pl.col("start") < pl.col("step_end"))
        .drop("step_end")
    )
    return runs.select("start", dur=pl.col("end") - pl.col("start"), step="step"), free, steps


def _overlap_lines(spans: pl.DataFrame, name: str, tid: int) -> pl.DataFrame:
    return spans.select(
        _text(
            f'{{"name":"{name}","pid":{OVERLAP_PID},"tid":{tid},"ts":"',
            _fixed3(pl.col("start")),
            '","dur":',
            _fixed3(pl.col("dur")),
            ',"ph":"X"}',
        )
    )


def write_trace_view(out: Path, events: int, seed: int = 0, block_tasks: int = 500_000) -> tuple[Path, pl.DataFrame]:
    """``trace_view.json`` with about ``events`` events; returns it and the expected per-step Computing/Free.

    Free spans the gaps between busy runs inside a step (a step ends where its last task ends),
    so per step Computing + Free equals the step's length, as in torch_npu's step table.
    """
    folder = out / "bench_0_20260101000000000_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    folder.mkdir(parents=True, exist_ok=True)
    (folder.parent / "profiler_info.json").write_text(json.dumps(PROFILER_INFO, indent=4) + "\n")
    path = folder / "trace_view.json"
    tasks = max(TASKS_PER_BUSY_RUN, int(events / EVENTS_PER_TASK) // TASKS_PER_BUSY_RUN * TASKS_PER_BUSY_RUN)
    block_tasks -= block_tasks % TASKS_PER_STEP  # a step never spans two blocks (only the last may be short)
    rng, kinds = np.random.default_rng(seed), _kind_table()
    expected, start, done = [], START_NS, 0
    with path.open("wb") as f:
        f.write(b"[\n")
        for line in _METADATA:
            f.write(line.encode() + b",\n")
        while done < tasks:
            n = min(block_tasks, tasks - done)
            frame, start = _rows(rng, n, done, start)
            computing, free, steps = _overlap(frame)
            blocks = _trace_block(frame, kinds)
            blocks.append(_overlap_lines(computing, "Computing", 0))
            blocks.append(_overlap_lines(free, "Free", 3))
            blocks.append(
                steps.select(
                    _text(
                        '{"ph":"X","name":"ProfilerStep#',
                        pl.col("step"),
                        f'","pid":{HOST_PID},"tid":{HOST_PID},"ts":"',
                        _fixed3(pl.col("start")),
                        '","dur":',
                        _fixed3(pl.col("end") - pl.col("start")),
                        ',"cat":"cpu_op","args":{}}',
                    )
                )
            )
            for block in blocks:
                block.select(pl.col("line") + ",").write_csv(f, include_header=False, quote_style="never")
            expected.append(
                computing.group_by("step")
                .agg(computing_us=pl.col("dur").sum() / 1000)
                .join(free.group_by("step").agg(free_us=pl.col("dur").sum() / 1000), on="step", how="left")
            )
            done += n
        f.write(
            b'{"name":"process_sort_index","pid":'
            + str(OVERLAP_PID).encode()
            + b',"tid":0,"ph":"M","args":{"sort_index":12}}\n]\n'
        )
    table = (
        pl.concat(expected).group_by("step").agg(pl.col("computing_us").sum(), pl.col("free_us").sum().fill_null(0.0))
    )
    return path, table.sort("step")


# --- ascend_pytorch_profiler.db (torch_npu export_type=db) ------------------------------------------
# The tables the readers use, as torch_npu writes them (column names, types and order of its export).
_DB_SCHEMA = [
    "CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY,value TEXT)",
    (
        "CREATE TABLE TASK (startNs INTEGER,endNs INTEGER,deviceId INTEGER,connectionId INTEGER,globalTaskId INTEGER,"
        "globalPid INTEGER,taskType INTEGER,contextId INTEGER,streamId INTEGER,taskId INTEGER,modelId INTEGER, depth integer)"
    ),
    (
        "CREATE TABLE COMPUTE_TASK_INFO (name INTEGER,globalTaskId INTEGER PRIMARY KEY,blockDim INTEGER,mixBlockDim INTEGER,"
        "taskType INTEGER,opType INTEGER,inputFormats INTEGER,inputDataTypes INTEGER,inputShapes INTEGER,"
        "outputFormats INTEGER,outputDataTypes INTEGER,outputShapes INTEGER,attrInfo INTEGER, waitNs INTEGER)"
    ),
    (
        "CREATE TABLE COMMUNICATION_OP (opName INTEGER,startNs INTEGER,endNs INTEGER,connectionId INTEGER,groupName INTEGER,"
        "opId INTEGER PRIMARY KEY,relay INTEGER,retry INTEGER,dataType INTEGER,algType INTEGER,count NUMERIC,"
        "opType INTEGER, waitNs INTEGER)"
    ),
    "CREATE TABLE STEP_TIME (id INTEGER, startNs INTEGER, endNs INTEGER)",
    (
        "CREATE TABLE OVERLAP_ANALYSIS (id INTEGER PRIMARY KEY AUTOINCREMENT, deviceId integer, startNs integer, "
        "endNs integer, type integer)"
    ),
]
_DB_INDEXES = ["CREATE INDEX TaskIndex ON TASK (startNs,globalTaskId)"]
DB_GROUP = "10.0.0.1%enp189s0f0_60000_0_1736410575713004"


def write_profiler_db(out: Path, tasks: int, seed: int = 0, block_tasks: int = 500_000) -> tuple[Path, pl.DataFrame]:
    """``*_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db`` with ``tasks`` device tasks.

    The op mix and timing of :func:`write_op_summary`; compute tasks in TASK x COMPUTE_TASK_INFO,
    collectives in TASK and COMMUNICATION_OP, strings once in STRING_IDS, steps in STEP_TIME and
    the overlap spans in OVERLAP_ANALYSIS (no analysis.db: the steps are rebuilt from those spans).
    Returns the path and the expected totals per (OP Type, Core Type): count and total µs.
    """
    import sqlite3

    folder = out / "bench_0_20260101000000000_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ascend_pytorch_profiler_0.db"
    path.unlink(missing_ok=True)
    strings: dict[str, int] = {}

    def sid(text: str) -> int:
        return strings.setdefault(text, len(strings))

    core_of = {k.task_type: ("HCCL" if k.task_type == "COMMUNICATION" else k.task_type) for k in KINDS}
    kind_ids = [
        (
            sid(k.op_name),
            sid(k.op_type),
            sid(core_of[k.task_type]),
            sid(k.inputs[0] or "N/A"),
            sid(k.inputs[1] or "N/A"),
            sid(k.inputs[2] or "N/A"),
            sid(k.outputs[0] or "N/A"),
            sid(k.outputs[1] or "N/A"),
            sid(k.outputs[2] or "N/A"),
        )
        for k in KINDS
    ]
    comm = np.array([k.task_type == "COMMUNICATION" for k in KINDS])
    allreduce, group, attr = sid("hcom_allReduce_"), sid(DB_GROUP), sid("")
    rng = np.random.default_rng(seed)
    expected, start, done, op_id = [], START_NS, 0, 0
    block_tasks -= block_tasks % TASKS_PER_STEP
    with sqlite3.connect(path) as conn:
        for statement in _DB_SCHEMA:
            conn.execute(statement)
        while done < tasks:
            n = min(block_tasks, tasks - done)
            frame, start = _rows(rng, n, done, start)
            kind, begin, dur = frame["kind"].to_numpy(), frame["start"].to_numpy(), frame["dur"].to_numpy()
            wait, stream, task_id = frame["wait"].to_numpy(), frame["stream"].to_numpy(), frame["task_id"].to_numpy()
            gid = np.arange(done, done + n)
            is_comm = comm[kind]
            conn.executemany(
                "INSERT INTO TASK VALUES (?,?,0,?,?,2871234,?,4294967295,?,?,4294967295,0)",
                zip(
                    begin.tolist(),
                    (begin + dur).tolist(),
                    gid.tolist(),
                    gid.tolist(),
                    [kind_ids[k][2] for k in kind.tolist()],
                    stream.tolist(),
                    task_id.tolist(),
                ),
            )
            compute = np.flatnonzero(~is_comm)
            conn.executemany(
                "INSERT INTO COMPUTE_TASK_INFO VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    (
                        ids[0],
                        g,
                        KINDS[k].block_dim,
                        KINDS[k].mix_block_dim,
                        ids[2],
                        ids[1],
                        ids[5],
                        ids[4],
                        ids[3],
                        ids[8],
                        ids[7],
                        ids[6],
                        attr,
                        w,
                    )
                    for g, k, w in zip(gid[compute].tolist(), kind[compute].tolist(), wait[compute].tolist())
                    for ids in (kind_ids[k],)
                ),
            )
            collective = np.flatnonzero(is_comm)
            conn.executemany(
                "INSERT INTO COMMUNICATION_OP VALUES (?,?,?,?,?,?,0,0,4,0,4097000,?,?)",
                (
                    (kind_ids[k][0], b, b + d, g, group, op_id + i, allreduce, w)
                    for i, (k, b, d, g, w) in enumerate(
                        zip(
                            kind[collective].tolist(),
                            begin[collective].tolist(),
                            dur[collective].tolist(),
                            gid[collective].tolist(),
                            wait[collective].tolist(),
                        )
                    )
                ),
            )
            op_id += len(collective)
            computing, free, steps = _overlap(frame)
            conn.executemany("INSERT INTO STEP_TIME VALUES (?,?,?)", steps.select("step", "start", "end").iter_rows())
            spans = pl.concat([computing.with_columns(type=pl.lit(0)), free.with_columns(type=pl.lit(3))]).sort("start")
            conn.executemany(
                "INSERT INTO OVERLAP_ANALYSIS (deviceId, startNs, endNs, type) VALUES (0,?,?,?)",
                spans.select("start", end=pl.col("start") + pl.col("dur"), kind="type").iter_rows(),
            )
            expected.append(frame.group_by("kind").agg(count=pl.len(), total_us=pl.col("dur").sum() / 1000))
            done += n
        conn.executemany("INSERT INTO STRING_IDS VALUES (?,?)", ((i, s) for s, i in strings.items()))
        for statement in _DB_INDEXES:
            conn.execute(statement)
    kinds = pl.DataFrame(
        {
            "kind": list(range(len(KINDS))),
            "op_type": [k.op_type for k in KINDS],
            "core_type": [core_of[k.task_type] for k in KINDS],
        },
        schema_overrides={"kind": pl.Int32},
    )
    totals = (
        pl.concat(expected)
        .group_by("kind")
        .agg(pl.col("count").sum(), pl.col("total_us").sum())
        .join(kinds, on="kind")
        .select("op_type", "core_type", "count", "total_us")
        .sort("op_type")
    )
    return path, totals
