"""What the advisor rules read of a capture, as records: one :class:`RankInput` per export.

Each rank's tasks and steps come from its dataset (text or database export); the rest, from the
files msprof-analyze's advisor reads for the same rules:

- the recorded environment: ``ENV_VARIABLES`` of ``profiler_metadata.json`` (torch_npu), of the
  database's ``META_DATA``, or ``environment`` of the lab's own ``run_info.json``;
- the communication analysis: ``communication.json``, else ``analysis.db`` (per op, per link);
- the timeline: ``trace_view.json`` (text) or the database's ``PYTORCH_API``, ``CANN_API``,
  ``GC_RECORD`` and ``COMMUNICATION_TASK_INFO`` tables: the framework and CANN API calls the
  schedule rules count, GC events, and the HCCL tasks with their sizes (byte alignment);
- the device facts: msprof's ``info.json.<n>`` (AI Core and vector core counts, the AI Core's
  nominal frequency), when the capture holds one.

A part the capture lacks is None, so a rule can say which file it would have needed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from common.errors import LabError
from common.formats.chrome_trace import event_args, iter_trace
from common.formats.communication import CommTiming, read_rank_communication
from common.formats.datasets import Dataset, find_datasets
from common.formats.metadata import PROFILER_METADATA_JSON
from common.formats.records import StepTime, Task
from common.formats.rundir import RUN_INFO
from common.formats.sqlite_file import SqliteFile

ENV_KEY = "ENV_VARIABLES"
_RANK_INFO = re.compile(r"^profiler_info_(\d+)\.json$")
# framework events the schedule rules count, by name (lower case): torch ops, optimizers, data loading, SyncBN
_FRAMEWORK = re.compile(r"^(aten::|optimizer\.step#|profilerstep#)|dataloader|^syncbatchnorm$")
_CANN = ("AscendCL@", "Node@launch")
_HCCL_PROCESSES = ("HCCL", "Communication")
_HCCL_TASK_HEADS = ("hcom", "Memcpy", "Reduce")
_API_PREFIX = {"acl": "AscendCL@", "node": "Node@", "runtime": "Runtime@", "model": "Model@"}


@dataclass(frozen=True)
class HostEvent:
    """One timeline event the rules count: a framework op, a CANN API call, a GC pass, a Free span (µs)."""

    name: str
    start_us: float
    dur_us: float


@dataclass(frozen=True)
class HcclTask:
    """One task of a communication op (Memcpy, Reduce_Inline ...), with what it moved."""

    op_name: str  # the hcom_* op it belongs to
    name: str
    dur_us: float
    size_bytes: float | None
    transport: str | None  # SDMA, RDMA, LOCAL
    link: str | None  # ON_CHIP, HCCS, PCIE, ROCE ...


@dataclass
class Timeline:
    source: str
    framework: list[HostEvent] = field(default_factory=list)
    cann: list[HostEvent] = field(default_factory=list)
    gc: list[HostEvent] = field(default_factory=list)
    free: list[HostEvent] = field(default_factory=list)  # the Overlap Analysis Free spans
    hccl_tasks: list[HcclTask] | None = None  # None: the timeline has no HCCL task level
    freq_mhz: list[tuple[float, float]] = field(default_factory=list)  # (ts, MHz) samples of AI Core Freq


@dataclass
class RankInput:
    rank: int | None
    where: str  # the export folder, for the report
    tasks: list[Task]
    steps: list[StepTime]
    env: dict[str, str] | None
    env_source: str | None
    backend: str | None  # a lab run's backend (run_info.json); None for a capture made outside the lab
    communication: list[CommTiming] | None
    timeline: Timeline | None
    device_info: dict | None  # info.json's DeviceInfo[0]: ai_core_num, aiv_num, aic_frequency


def _rank_of(ds: Dataset) -> tuple[int | None, Path]:
    """The rank (profiler_info_<r>.json of the *_ascend_pt folder) and that folder."""
    for folder in (ds.folder.parent, ds.folder):
        for p in folder.glob("profiler_info_*.json"):
            m = _RANK_INFO.match(p.name)
            if m:
                return int(m[1]), folder
    return None, ds.folder.parent


def _json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise LabError(
            f"{path}: unreadable ({err})", "the file is damaged or cut short; copy the capture again"
        ) from None


def _environment(ds: Dataset, rank_folder: Path) -> tuple[dict[str, str] | None, str | None, str | None]:
    """(the recorded environment, where it was recorded, the lab run's backend when a run_info.json recorded it)."""
    for folder in (rank_folder, ds.folder, *ds.folder.parents[:3]):
        meta = folder / PROFILER_METADATA_JSON
        if meta.is_file():
            values = _json(meta)
            env = values.get(ENV_KEY) if isinstance(values, dict) else None
            if isinstance(env, dict):
                return {str(k): "" if v is None else str(v) for k, v in env.items()}, str(meta), None
        info = folder / RUN_INFO
        if info.is_file():
            values = _json(info)
            env = values.get("environment") if isinstance(values, dict) else None
            if isinstance(env, dict):
                return {str(k): str(v) for k, v in env.items()}, str(info), str(values.get("backend"))
    if ds.is_db:
        db = SqliteFile(ds.db, "torch_npu (profiler database)")
        if db.has("META_DATA", "name", "value"):
            rows = db.query("SELECT value FROM META_DATA WHERE name = ?", (ENV_KEY,))
            if rows and rows[0][0]:
                try:
                    env = json.loads(rows[0][0])
                except json.JSONDecodeError:
                    env = None
                if isinstance(env, dict):
                    return {str(k): str(v) for k, v in env.items()}, f"{ds.db} META_DATA", None
    return None, None, None


def _device_info(ds: Dataset) -> dict | None:
    """msprof's info.json.<n> (PROF_*/device_<n>/): the first DeviceInfo entry."""
    for folder in (ds.folder, *ds.folder.parents[:2]):
        for path in sorted(folder.glob("device_*/info.json*")):
            if path.name.endswith("done"):
                continue
            values = _json(path)
            infos = values.get("DeviceInfo") if isinstance(values, dict) else None
            if isinstance(infos, list) and infos and isinstance(infos[0], dict):
                return infos[0]
    return None


def _number(value: object) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _text_timeline(path: Path) -> Timeline:
    """The events the rules count, from a trace_view.json, decoded a block at a time."""
    line = Timeline(str(path))
    names: dict[object, str] = {}
    hccl: list = []
    for block in iter_trace(path):
        for e in block:
            if e.name == "process_name":
                names[e.pid] = str(event_args(e).get("name", ""))
                continue
            if e.ph == "C" and e.name == "AI Core Freq":
                mhz = _number(event_args(e).get("MHz"))
                if mhz is not None and _number(e.ts) is not None:
                    line.freq_mhz.append((float(e.ts), mhz))
                continue
            if e.ph != "X" or _number(e.ts) is None:
                continue
            event = HostEvent(e.name, float(e.ts), _number(e.dur) or 0.0)
            if (e.cat or "").lower() == "gc":
                line.gc.append(event)
            elif e.name.startswith(_CANN):
                line.cann.append(event)
            elif _FRAMEWORK.search(e.name.lower()):
                line.framework.append(event)
            elif e.name == "Free":
                line.free.append(event)
            elif e.name.split("_")[0] in _HCCL_TASK_HEADS:
                hccl.append((e.pid, event, e))
    pids = {pid for pid, name in names.items() if name in _HCCL_PROCESSES}
    if pids:
        line.hccl_tasks = []
        op = None
        for _, event, e in sorted((h for h in hccl if h[0] in pids), key=lambda h: h[1].start_us):
            if event.name.startswith("hcom"):
                op = event.name
            elif op is not None:
                args = event_args(e)
                line.hccl_tasks.append(
                    HcclTask(
                        op,
                        event.name,
                        event.dur_us,
                        _number(args.get("size(Byte)")),
                        args.get("transport type"),
                        args.get("link type"),
                    )
                )
    return line


def _db_timeline(ds: Dataset) -> Timeline:
    """The same events from a torch_npu database (ns -> µs)."""
    db = ds.profiler_db
    file, strings = db.db, db.strings
    line = Timeline(f"{ds.db} (PYTORCH_API, CANN_API, GC_RECORD, COMMUNICATION_TASK_INFO)")
    if file.has("PYTORCH_API", "startNs", "endNs", "name"):
        for start, end, name in file.query(
            "SELECT CAST(startNs AS INTEGER), CAST(endNs AS INTEGER), name FROM PYTORCH_API"
        ):
            text = strings.get(name, "")
            if _FRAMEWORK.search(text.lower()):
                line.framework.append(HostEvent(text, start / 1e3, (end - start) / 1e3))
    if file.has("CANN_API", "startNs", "endNs", "name", "type"):
        kinds = (
            dict(file.query("SELECT id, name FROM ENUM_API_TYPE")) if file.has("ENUM_API_TYPE", "id", "name") else {}
        )
        for start, end, name, kind in file.query(
            "SELECT CAST(startNs AS INTEGER), CAST(endNs AS INTEGER), name, type FROM CANN_API"
        ):
            text = _API_PREFIX.get(kinds.get(kind, ""), "") + strings.get(name, "")
            if text.startswith(_CANN):
                line.cann.append(HostEvent(text, start / 1e3, (end - start) / 1e3))
    if file.has("GC_RECORD", "startNs", "endNs"):
        line.gc = [
            HostEvent("GC", s / 1e3, (e - s) / 1e3)
            for s, e in file.query("SELECT CAST(startNs AS INTEGER), CAST(endNs AS INTEGER) FROM GC_RECORD")
        ]
    tables = ("COMMUNICATION_TASK_INFO", "COMMUNICATION_OP", "ENUM_HCCL_LINK_TYPE", "ENUM_HCCL_TRANSPORT_TYPE")
    if all(file.has(t) for t in tables):
        rows = file.query(
            "SELECT o.opName, i.taskType, CAST(t.endNs AS INTEGER) - CAST(t.startNs AS INTEGER), i.size, tr.name, lk.name "
            "FROM COMMUNICATION_TASK_INFO AS i JOIN TASK AS t ON t.globalTaskId = i.globalTaskId "
            "JOIN COMMUNICATION_OP AS o ON o.opId = i.opId "
            "LEFT JOIN ENUM_HCCL_TRANSPORT_TYPE AS tr ON tr.id = i.transportType "
            "LEFT JOIN ENUM_HCCL_LINK_TYPE AS lk ON lk.id = i.linkType ORDER BY t.startNs"
        )
        line.hccl_tasks = [
            HcclTask(strings.get(op, str(op)), strings.get(kind, str(kind)), dur / 1e3, _number(size), transport, link)
            for op, kind, dur, size, transport, link in rows
        ]
    return line


def _timeline(ds: Dataset) -> Timeline | None:
    if ds.is_db:
        return _db_timeline(ds) if ds.kind == "torch_npu_db" else None
    paths = ds.files("trace_view") or ds.files("msprof")
    return _text_timeline(paths[0]) if paths else None


def _communication(ds: Dataset) -> list[CommTiming] | None:
    found = read_rank_communication(ds.folder) if ds.kind in ("torch_npu", "torch_npu_db") else None
    return None if found is None else found[0]


def read_rank_input(ds: Dataset) -> RankInput:
    """One export's records."""
    rank, folder = _rank_of(ds)
    env, env_source, backend = _environment(ds, folder)
    return RankInput(
        rank,
        str(ds.folder),
        ds.tasks,
        ds.steps,
        env,
        env_source,
        backend,
        _communication(ds),
        _timeline(ds),
        _device_info(ds),
    )


def rank_input(ds: Dataset) -> RankInput:
    """:func:`read_rank_input`, kept with the dataset: a report reads each export once for its text and its page."""
    if "rank_input" not in ds.memo:
        ds.memo["rank_input"] = read_rank_input(ds)
    return ds.memo["rank_input"]


def iter_capture_inputs(root: Path | str) -> Iterator[RankInput]:
    """One record per export under ``root``, by rank where ranks are recorded, read one at a time: a capture of
    a thousand ranks is never in memory at once (each export is let go once its record is handed on)."""
    datasets: list[Dataset | None] = list(find_datasets(root))
    ranks = [_rank_of(ds)[0] for ds in datasets]
    order = sorted(range(len(datasets)), key=lambda i: (ranks[i] is None, ranks[i] or 0, str(datasets[i].folder)))
    for i in order:
        ds, datasets[i] = datasets[i], None
        yield read_rank_input(ds)


def read_capture_inputs(root: Path | str) -> list[RankInput]:
    """Every record of :func:`iter_capture_inputs` (small captures, tests)."""
    return list(iter_capture_inputs(root))
