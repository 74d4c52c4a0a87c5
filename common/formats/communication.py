"""torch_npu's communication analysis, per collective and point-to-point op, from either export.

- text: ``ASCEND_PROFILER_OUTPUT/communication.json``: ``{step: {"collective" | "p2p": {"<op>@<group>":
  {"Communication Time Info": {...}, "Communication Bandwidth Info": {<link>: {...}}}}}}``;
  ``"Total Op Info"`` inside each kind is torch_npu's sum over the step, not an op.
- database: ``ASCEND_PROFILER_OUTPUT/analysis.db``: ``CommAnalyzerTime`` (one row per op) and
  ``CommAnalyzerBandwidth`` (one row per op, link and packet size; the link's totals repeat on each).

Both carry the same fields (CANN's msprof communication analysis; their meaning is in
``docs/reading_captures.md``): elapse, transit, wait, synchronization and idle time (ms), and per
link type (HCCS, SDMA, RDMA, PCIE, SIO, LOCAL) the size moved (MB), the time moving it (ms) and
the bandwidth (GB/s). Read here into :class:`CommTiming` rows, in the files' units.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from common.errors import LabError
from common.formats.sqlite_file import SqliteFile

COMMUNICATION_JSON = "communication.json"
ANALYSIS_DB = "analysis.db"
TOTAL_OP_INFO = "Total Op Info"  # torch_npu's per-step sum inside "collective" and "p2p"; not an op
KINDS = ("collective", "p2p")
_TIME_FIELDS = {  # communication.json "Communication Time Info" key -> CommAnalyzerTime column
    "Elapse Time(ms)": "elapse_time",
    "Transit Time(ms)": "transit_time",
    "Wait Time(ms)": "wait_time",
    "Synchronization Time(ms)": "synchronization_time",
    "Idle Time(ms)": "idle_time",
}


@dataclass(frozen=True)
class LinkTransfer:
    """What one op moved over one link type."""

    link: str  # HCCS, SDMA, RDMA, PCIE, SIO, LOCAL
    size_mb: float
    time_ms: float
    bandwidth_gbs: float


@dataclass(frozen=True)
class CommTiming:
    """One collective or point-to-point op of one rank, as its communication analysis splits it (ms)."""

    step: str  # as written: "step50"
    kind: str  # "collective" | "p2p"
    op_name: str  # hcom_allReduce__586_0_1: the same on every rank of the group
    group: str
    start_us: float | None
    elapse_ms: float
    transit_ms: float
    wait_ms: float
    sync_ms: float
    idle_ms: float
    links: tuple[LinkTransfer, ...]  # the links that moved data (size > 0)

    @property
    def key(self) -> tuple[str, str, str]:
        """What names the same op on every rank: (step, op name, group)."""
        return self.step, self.op_name, self.group


def collectives_of(step: dict) -> dict:
    """A communication.json step's collectives, without torch_npu's ``Total Op Info`` summary entry."""
    return {name: op for name, op in (step.get("collective") or {}).items() if name != TOTAL_OP_INFO}


def _number(value: object, where: str) -> float:
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        out = math.nan
    if not math.isfinite(out):
        raise LabError(f"{where}: {value!r} is not a number", "the file is damaged; export the profile again")
    return out


def _load_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise LabError(
            f"{path}: unreadable ({err})", "the file is damaged or cut short; export or copy the profile again"
        ) from None


def read_communication_json(path: Path | str) -> list[CommTiming]:
    """Every op of communication.json, in the file's order."""
    path = Path(path)
    data = _load_json(path)
    if not isinstance(data, dict):
        raise LabError(
            f"{path}: not torch_npu's communication.json (a {type(data).__name__}, not steps)",
            "give the communication.json torch_npu wrote",
        )
    out = []
    for step, kinds in data.items():
        if not isinstance(kinds, dict):
            continue
        for kind in KINDS:
            for full, op in (kinds.get(kind) or {}).items():
                if full == TOTAL_OP_INFO:  # the step's sum of this kind, in "collective" and in "p2p"
                    continue
                name, _, group = full.rpartition("@") if "@" in full else (full, "", "")
                where = f"{path}: {step} {full}"
                times = (op or {}).get("Communication Time Info") or {}
                missing = [k for k in _TIME_FIELDS if k not in times]
                if missing:
                    raise LabError(
                        f"{where}: no {', '.join(missing)}",
                        "the file is damaged, or from a torch_npu this lab does not read",
                    )
                links = []
                for link, bw in ((op or {}).get("Communication Bandwidth Info") or {}).items():
                    size = _number(bw.get("Transit Size(MB)", 0), f"{where} {link}")
                    if size > 0:
                        links.append(
                            LinkTransfer(
                                link,
                                size,
                                _number(bw.get("Transit Time(ms)", 0), where),
                                _number(bw.get("Bandwidth(GB/s)", 0), where),
                            )
                        )
                start = times.get("Start Timestamp(us)")
                elapse, transit, wait, sync, idle = (_number(times[k], f"{where} {k}") for k in _TIME_FIELDS)
                out.append(
                    CommTiming(
                        str(step),
                        kind,
                        name,
                        group,
                        None if start is None else _number(start, where),
                        elapse,
                        transit,
                        wait,
                        sync,
                        idle,
                        tuple(links),
                    )
                )
    return out


def read_comm_analyzer(path: Path | str) -> list[CommTiming]:
    """Every op of analysis.db's CommAnalyzerTime, with its links from CommAnalyzerBandwidth, by start time."""
    file = SqliteFile(path, "torch_npu (analysis.db)")
    file.require({"CommAnalyzerTime": ("hccl_op_name", "group_name", *_TIME_FIELDS.values(), "step", "type")})
    has_start = "start_timestamp" in file.schema["CommAnalyzerTime"]
    links: dict[tuple, dict[str, LinkTransfer]] = {}
    if "CommAnalyzerBandwidth" in file.schema:
        rows = file.query(
            "SELECT step, type, hccl_op_name, group_name, transport_type, transit_size, transit_time, "
            "bandwidth FROM CommAnalyzerBandwidth"
        )
        for step, kind, name, group, link, size, time_ms, bandwidth in rows:
            if size and float(size) > 0:  # the link's totals repeat on each packet-size row: keep one
                links.setdefault((step, (kind or "").lower(), name, group), {}).setdefault(
                    link, LinkTransfer(link, float(size), float(time_ms or 0), float(bandwidth or 0))
                )
    columns = ", ".join(_TIME_FIELDS.values())
    start = "start_timestamp" if has_start else "NULL"
    rows = file.query(
        f"SELECT step, type, hccl_op_name, group_name, {start}, {columns} FROM CommAnalyzerTime ORDER BY {start}"
    )
    out = []
    for step, kind, name, group, start_us, *times in rows:
        kind = (kind or "").lower()
        values = [_number(v, f"{path}: CommAnalyzerTime {name}") for v in times]
        out.append(
            CommTiming(
                str(step),
                kind,
                name,
                str(group),
                None if start_us is None else float(start_us),
                *values,
                tuple(links.get((step, kind, name, group), {}).values()),
            )
        )
    return out


def read_rank_communication(output_dir: Path) -> tuple[list[CommTiming], str] | None:
    """A rank's ops from its ``ASCEND_PROFILER_OUTPUT``: communication.json, else analysis.db; None when neither."""
    text, db = output_dir / COMMUNICATION_JSON, output_dir / ANALYSIS_DB
    if text.is_file():
        return read_communication_json(text), COMMUNICATION_JSON
    if db.is_file():
        file = SqliteFile(db, "torch_npu (analysis.db)")
        if "CommAnalyzerTime" in file.schema:
            return read_comm_analyzer(db), f"{ANALYSIS_DB} CommAnalyzerTime"
    return None


COMMUNICATION_MATRIX_JSON = "communication_matrix.json"


@dataclass(frozen=True)
class MatrixLink:
    """One src-dst entry of communication_matrix.json (torch_npu groups ops into "<op>-top1", "-total" ...)."""

    step: str
    bucket: str  # allreduce-total, allreduce-top1, ...
    group: str
    src: int
    dst: int
    transport: str  # LOCAL, HCCS, RDMA, PCIE, SIO
    size_mb: float
    time_ms: float
    bandwidth_gbs: float


def read_communication_matrix(path: Path | str) -> list[MatrixLink]:
    """Every src-dst link of communication_matrix.json (collective and p2p buckets)."""
    path = Path(path)
    data = _load_json(path)
    out = []
    for step, kinds in data.items() if isinstance(data, dict) else []:
        for kind in KINDS:
            for full, links in ((kinds or {}).get(kind) or {}).items():
                bucket, _, group = full.rpartition("@") if "@" in full else (full, "", "")
                for pair, link in (links or {}).items():
                    src, _, dst = pair.partition("-")
                    if not (src.isdigit() and dst.isdigit()):
                        continue
                    where = f"{path}: {step} {full} {pair}"
                    out.append(
                        MatrixLink(
                            str(step),
                            bucket,
                            group,
                            int(src),
                            int(dst),
                            str(link.get("Transport Type", "")),
                            _number(link.get("Transit Size(MB)", 0), where),
                            _number(link.get("Transit Time(ms)", 0), where),
                            _number(link.get("Bandwidth(GB/s)", 0), where),
                        )
                    )
    return out


def read_comm_analyzer_matrix(path: Path | str) -> list[MatrixLink]:
    """analysis.db's CommAnalyzerMatrix as :class:`MatrixLink` rows (the same buckets as communication_matrix.json)."""
    file = SqliteFile(path, "torch_npu (analysis.db)")
    file.require(
        {
            "CommAnalyzerMatrix": (
                "hccl_op_name",
                "group_name",
                "src_rank",
                "dst_rank",
                "transport_type",
                "transit_size",
                "transit_time",
                "bandwidth",
                "step",
            )
        }
    )
    rows = file.query(
        "SELECT step, hccl_op_name, group_name, src_rank, dst_rank, transport_type, transit_size, "
        "transit_time, bandwidth FROM CommAnalyzerMatrix"
    )
    out = []
    for step, bucket, group, src, dst, transport, size, time_ms, bandwidth in rows:
        if str(src).isdigit() and str(dst).isdigit():
            where = f"{path}: CommAnalyzerMatrix {bucket} {src}-{dst}"
            out.append(
                MatrixLink(
                    str(step),
                    bucket,
                    str(group),
                    int(src),
                    int(dst),
                    str(transport),
                    _number(size, where),
                    _number(time_ms, where),
                    _number(bandwidth, where),
                )
            )
    return out


def read_rank_matrix(output_dir: Path) -> list[MatrixLink]:
    """A rank's link matrix: communication_matrix.json, else analysis.db's CommAnalyzerMatrix; [] when neither."""
    text, db = output_dir / COMMUNICATION_MATRIX_JSON, output_dir / ANALYSIS_DB
    if text.is_file():
        return read_communication_matrix(text)
    if db.is_file() and "CommAnalyzerMatrix" in SqliteFile(db, "torch_npu (analysis.db)").schema:
        return read_comm_analyzer_matrix(db)
    return []


def group_members(links: list[MatrixLink]) -> dict[str, set[int]]:
    """Per communication group, every rank its links name (the group's size, even where only some were captured)."""
    out: dict[str, set[int]] = {}
    for link in links:
        out.setdefault(link.group, set()).update((link.src, link.dst))
    return out


@dataclass(frozen=True)
class RankCollectives:
    """Per rank, per step, the sorted names of the collectives it ran, and where they were read from
    (``COMMUNICATION_OP`` of a database, else ``communication.json``); ``missing``: the first rank's
    communication.json that does not exist (then ``per_rank`` holds the ranks read before it)."""

    per_rank: dict[int, dict[str, list[str]]]
    source: str
    first_rank: int
    missing: Path | None = None


def rank_collectives(ranks: list) -> RankCollectives:
    """The collectives of every rank (the cluster view's per-rank profiles: ``.rank``, ``.folder``,
    ``.dataset``, ``.communication()``), in rank order: a database's COMMUNICATION_OP rows by step,
    else communication.json without its ``Total Op Info`` summary (HCCL schema)."""
    source = "COMMUNICATION_OP" if ranks[0].dataset.is_db else "communication.json"
    per_rank: dict[int, dict[str, list[str]]] = {}
    for p in ranks:
        if p.dataset.is_db:
            by_step: dict[str, list[str]] = {}
            for op in p.communication():
                by_step.setdefault(str(op.step_id), []).append(f"{op.op_name}@{op.group or ''}")
            per_rank[p.rank] = {step: sorted(names) for step, names in by_step.items()}
            continue
        path = p.folder / "ASCEND_PROFILER_OUTPUT" / "communication.json"
        if not path.is_file():
            return RankCollectives(per_rank, source, ranks[0].rank, path)
        data = json.loads(path.read_text())
        per_rank[p.rank] = {step: sorted(collectives_of(ops)) for step, ops in data.items()}
    return RankCollectives(per_rank, source, ranks[0].rank)
