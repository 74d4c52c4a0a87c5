"""Typed rows, one class per file kind, with unit-carrying field names."""

from __future__ import annotations

from dataclasses import dataclass, field

from common.formats.engine import np


@dataclass
class Task:
    """One device task: a row of op_summary or kernel_details."""

    op_name: str
    op_type: str
    task_type: str  # AI_CORE, AI_VECTOR_CORE, MIX_AIC, ... or CPU on the portable backend
    start_us: float
    duration_us: float
    wait_us: float | None = None
    device_id: str | None = None
    block_dim: int | None = None
    op_state: str | None = None  # OP State: static / dynamic (None: not recorded, e.g. Level0 or older exports)
    input_shapes: str | None = None
    input_dtypes: str | None = None
    output_shapes: str | None = None
    output_dtypes: str | None = None
    step_id: int | None = None
    pmu: dict[str, float | None] = field(default_factory=dict)

    @property
    def end_us(self) -> float:
        return self.start_us + self.duration_us


@dataclass
class TxRange:
    """One application range of msprof_tx(_*).csv (``--msproftx=on``): its message and times (µs).

    ``device_*`` are where the range's marks ran on the device's stream (a range started with a
    stream); None when only the host was marked. Tasks of the range run between the device marks.
    """

    message: str
    start_us: float
    end_us: float
    device_start_us: float | None = None
    device_end_us: float | None = None

    @property
    def window_us(self) -> tuple[float, float]:
        """Where the range's tasks run: the device marks when recorded, else the host's."""
        if self.device_start_us is not None and self.device_end_us is not None:
            return self.device_start_us, self.device_end_us
        return self.start_us, self.end_us


@dataclass
class OpStat:
    """One row of op_statistic: all tasks of one OP Type on one core type."""

    op_type: str
    core_type: str
    count: int
    total_us: float
    min_us: float
    avg_us: float
    max_us: float
    ratio_pct: float
    device_id: str | None = None


@dataclass
class ApiStat:
    """One row of api_statistic: host API calls of one name."""

    level: str
    api_name: str
    time_us: float
    count: int
    avg_us: float
    min_us: float
    max_us: float
    variance: float | None


@dataclass
class TaskTimeRow:
    """One row of task_time: every hardware task, compute or not."""

    kernel_name: str | None
    kernel_type: str
    stream_id: str
    task_id: str
    task_time_us: float
    start_us: float
    stop_us: float


@dataclass
class StepTime:
    """One row of step_trace_time: where a training/inference step's time went (µs)."""

    step: int | None
    computing_us: float
    communication_not_overlapped_us: float
    overlapped_us: float
    communication_us: float
    free_us: float
    stage_us: float
    bubble_us: float
    preparing_us: float | None
    device_id: str | None = None

    @property
    def total_us(self) -> float:
        return self.computing_us + self.communication_not_overlapped_us + self.free_us


def time_by_op_and_dtypes(tasks: list[Task]) -> dict[tuple[str, str], float]:
    """Summed task µs per (OP Type, Input Data Types): which precision the time ran in."""
    out: dict[tuple[str, str], float] = {}
    for t in tasks:
        key = (t.op_type, t.input_dtypes or "")
        out[key] = out.get(key, 0.0) + t.duration_us
    return out


@dataclass
class TraceEvent:
    """One Chrome-trace event of msprof_*.json or trace_view.json (µs)."""

    name: str
    ph: str
    pid: int | str
    tid: int | str
    ts_us: float | None
    dur_us: float | None
    cat: str | None = None
    args: dict = field(default_factory=dict)


@dataclass
class OverlapEvents:
    """A timeline's ``Overlap Analysis`` events, columnar (millions fit), with what the step table needs.

    ``kind`` indexes OVERLAP_EVENTS; ``steps`` are ProfilerStep#N starts (empty: no schedule ran);
    ``bubble_*`` are the ``hcom_receive*`` events; ``labels`` the overlap process's labels (``NPU 0``).
    """

    kind: np.ndarray  # int8
    ts_us: np.ndarray  # float64
    dur_us: np.ndarray  # float64
    steps: list[tuple[int, float]] = field(default_factory=list)
    bubble_ts_us: np.ndarray = field(default_factory=lambda: np.zeros(0))
    bubble_dur_us: np.ndarray = field(default_factory=lambda: np.zeros(0))
    labels: list[str] = field(default_factory=list)


OVERLAP_PROCESS = "Overlap Analysis"  # torch_npu / msprof timeline process with the Computing / Free tracks
OVERLAP_EVENTS = ("Computing", "Communication", "Communication(Not Overlapped)", "Free")


@dataclass
class CommOp:
    """One collective or point-to-point operation: an HCCL row of kernel_details / COMMUNICATION_OP (µs)."""

    op_name: str  # hcom_allReduce__210_0_1: the same name on every rank of the group
    op_type: str  # hcom_allReduce_
    group: str | None
    start_us: float
    duration_us: float
    wait_us: float | None = None
    step_id: int | None = None
    device_id: str | None = None


@dataclass
class MemoryRecord:
    """One row of memory_record: the allocator's totals at one moment (MB, as torch_npu prints them)."""

    component: str  # PTA, GE, PTA+GE, APP
    timestamp_us: float
    total_allocated_mb: float | None
    total_reserved_mb: float | None
    total_active_mb: float | None
    stream_ptr: str | None = None
    device: str | None = None  # "NPU:0"


@dataclass
class OpMemory:
    """One row of operator_memory: one allocation by one operator (KB / µs / MB as torch_npu prints them)."""

    name: str
    size_kb: float
    allocation_us: float
    release_us: float | None
    duration_us: float | None
    allocation_total_allocated_mb: float | None
    allocation_total_reserved_mb: float | None
    release_total_allocated_mb: float | None
    release_total_reserved_mb: float | None
    stream_ptr: str | None = None
    device: str | None = None
