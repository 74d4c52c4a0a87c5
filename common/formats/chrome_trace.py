"""Timelines (msprof_*.json, trace_view.json): Chrome-trace event arrays decoded a block at a time.

:func:`iter_trace` decodes any such file with bounded memory and names the line of any damage;
:func:`overlap_events` keeps from blocks of events only what the step table reads (Overlap
Analysis spans, ProfilerStep, hcom_receive). The public readers are
:func:`common.formats.readers.read_trace` and :func:`common.formats.readers.read_overlap`.
"""

from __future__ import annotations

import codecs
import re
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path

from common.errors import LabError
from common.formats.engine import msgspec, np
from common.formats.records import OVERLAP_EVENTS, OVERLAP_PROCESS, OverlapEvents, TraceEvent
from common.formats.table import finite_number, line_at

TRACE_BLOCK_BYTES = 16 << 20  # the trace is decoded this much at a time: the memory bound of a read
EVENT_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_STEP_EVENT = re.compile(r"^ProfilerStep#(\d+)$")


class Event(msgspec.Struct):
    """The fields of a Chrome-trace event the lab uses; ``args`` stays undecoded until asked for."""

    ph: str
    name: str = ""
    pid: int | str = ""
    tid: int | str = ""
    ts: str | float | None = None
    dur: str | float | None = None
    cat: str | None = None
    args: msgspec.Raw = msgspec.Raw(b"{}")


_DECODER = msgspec.json.Decoder(list[Event])


class TimedEvent(msgspec.Struct):
    """What the step table reads of an event, ``ts``/``dur`` parsed to floats while decoding (string or not)."""

    ph: str
    name: str = ""
    pid: int | str = ""
    ts: float | None = None
    dur: float | None = None
    args: msgspec.Raw = msgspec.Raw(b"{}")


# strict=False lets msgspec turn msprof's string timestamps into floats without a Python str per event.
TIMED_DECODER = msgspec.json.Decoder(list[TimedEvent], strict=False)


def trace_number(value: str | float | None, path: Path, where: str) -> float | None:
    return None if value is None else finite_number(value, path, where, "the trace is damaged; re-export it")


def iter_trace(path: Path | str, timed: bool = False) -> Iterator[list[Event] | list[TimedEvent]]:
    """The events of a Chrome-trace JSON array, a decoded block at a time (bounded memory).

    Blocks are cut at ``}, {`` and decoded with msgspec; a cut that fell inside a string or a
    nested object cannot decode (unbalanced quotes or braces), so the block is joined with the
    next one and tried again. A file that does not decode stops with the line where it broke.
    ``timed``: events carry float ``ts``/``dur`` (a block whose times are not numbers is decoded
    as text instead, so the error can name the value).
    """
    path = Path(path)
    if not path.is_file():
        raise LabError(f"{path}: file not found", "run the mode that writes it")
    damaged = "the trace is truncated or damaged; re-export it"
    with path.open("rb") as f:
        head = f.read(TRACE_BLOCK_BYTES)
        body = head.removeprefix(codecs.BOM_UTF8)
        body = body.lstrip()
        if body.startswith(b"{"):  # {"traceEvents": [...]}: small files only, decode whole
            yield _decode_object(path, body + f.read())
            return
        if not body:
            raise LabError(f"{path}: file is empty", "re-run the collection")
        if not body.startswith(b"["):
            raise LabError(f"{path}: expected a JSON array of trace events", "this is not an msprof/torch_npu timeline")
        offset = len(head) - len(body) + 1  # file offset of ``pending``
        pending, done = body[1:], False
        while not done:
            block = f.read(TRACE_BLOCK_BYTES)
            done = not block
            pending += block
            if done:
                piece = pending.rstrip()
                if not piece.endswith(b"]"):
                    line = line_at(path, offset + len(piece))
                    raise LabError(f"{path}:{line}: not valid JSON: the trace ends before its closing ']'", damaged)
                piece, cut = piece[:-1], len(pending)
            else:
                cut = _last_boundary(pending)
                if cut is None:
                    continue
                piece = pending[:cut]
            text = piece.lstrip(b" \t\r\n,").rstrip()
            try:
                events = _decode_block(b"[" + text + b"]", timed) if text else []
            except (msgspec.DecodeError, msgspec.ValidationError) as err:
                if not done and len(pending) < _TRACE_MAX_PENDING:
                    continue  # a cut inside a string or nested object: join with the next block
                where = offset + len(piece) - len(piece.lstrip(b" \t\r\n,")) + _error_byte(err)
                raise LabError(f"{path}:{line_at(path, where)}: not valid JSON ({err})", damaged) from None
            yield events
            offset += cut
            pending = pending[cut:]


_TRACE_MAX_PENDING = 8 * TRACE_BLOCK_BYTES  # one event longer than this is taken as damage


def _decode_block(data: bytes, timed: bool) -> list[Event] | list[TimedEvent]:
    if timed:
        try:
            return TIMED_DECODER.decode(data)
        except msgspec.ValidationError:
            pass  # a time that is not a number: the text decoder keeps it for the error message
    return _DECODER.decode(data)


def _error_byte(err: Exception) -> int:
    match = re.search(r"at byte (\d+)", str(err))
    return max(0, int(match[1]) - 1) if match else 0


def _last_boundary(data: bytes) -> int | None:
    """Offset just past the ``}`` of the last ``}, {`` in ``data``, or None."""
    end = len(data)
    while end > 0:
        start = max(0, end - (1 << 16))
        matches = list(EVENT_BOUNDARY.finditer(data, start, end))
        if matches:
            return matches[-1].start() + 1
        if start == 0:
            return None
        end = start + 64  # overlap so a boundary split by the window is still seen


def _decode_object(path: Path, data: bytes) -> list[Event]:
    try:
        events = msgspec.json.decode(data, type=dict[str, msgspec.Raw]).get("traceEvents")
        if events is None:
            raise LabError(f"{path}: expected a JSON array of trace events", "this is not an msprof/torch_npu timeline")
        return _DECODER.decode(events)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise LabError(f"{path}: not valid JSON ({err})", "the trace is truncated or damaged; re-export it") from None


def event_args(event: Event | TimedEvent | TraceEvent) -> dict:
    if isinstance(event, TraceEvent):
        return event.args
    try:
        args = msgspec.json.decode(event.args)
    except msgspec.DecodeError:
        args = None
    return args if isinstance(args, dict) else {}


def overlap_events(blocks: Iterable[list[Event] | list[TimedEvent] | list[TraceEvent]], path: Path) -> OverlapEvents:
    """Keep only what the step table needs from blocks of events: Overlap Analysis, ProfilerStep, hcom_receive."""
    overlap_pids: set = set()
    labels: dict = {}
    steps: list[tuple[int, float]] = []
    kinds = {name: i for i, name in enumerate(OVERLAP_EVENTS)}
    pid_of: list = []
    kind_of, ts_of, dur_of = array("b"), array("d"), array("d")
    bubble_ts, bubble_dur = array("d"), array("d")
    for block in blocks:
        # One C-speed pass drops the host and device events (nearly all of a trace) before any Python work.
        kept = [e for e in block if e.name in kinds or e.ph == "M" or e.name.startswith(_KEPT_PREFIXES)]
        spans = [e for e in kept if e.name in kinds and e.ph == "X"]
        times = [e.ts for e in spans] if spans and all(type(e) is TimedEvent for e in spans) else None
        if times is not None and None not in times:  # the common case, a list at a time
            pid_of.extend([e.pid for e in spans])
            kind_of.extend([kinds[e.name] for e in spans])
            ts_of.extend(times)
            dur_of.extend([e.dur or 0.0 for e in spans])
            kept = [e for e in kept if not (e.name in kinds and e.ph == "X")]
        for e in kept:
            if e.ph == "M":
                args = event_args(e)
                if e.name == "process_name" and args.get("name") == OVERLAP_PROCESS:
                    overlap_pids.add(e.pid)
                elif e.name == "process_labels":
                    labels[e.pid] = str(args.get("labels", ""))
                continue
            if e.ph != "X":
                continue
            if isinstance(e, TimedEvent) and e.ts is not None:
                ts, dur = e.ts, e.dur or 0.0  # checked for finite / negative below, all at once
            else:
                ts, dur = _event_times(e, path)
            kind = kinds.get(e.name)
            if kind is not None:
                pid_of.append(e.pid)
                kind_of.append(kind)
                ts_of.append(ts)
                dur_of.append(dur)
            elif e.name.startswith("hcom_receive"):
                bubble_ts.append(ts)
                bubble_dur.append(dur)
            elif (m := _STEP_EVENT.match(e.name)) is not None:
                steps.append((int(m[1]), ts))
    keep = np.fromiter((p in overlap_pids for p in pid_of), dtype=bool, count=len(pid_of))
    for times, durations in ((ts_of, dur_of), (bubble_ts, bubble_dur)):
        ts, dur = np.frombuffer(times), np.frombuffer(durations)
        bad = ~np.isfinite(ts) | ~np.isfinite(dur) | (dur < 0)
        if bad.any():
            i = int(np.argmax(bad))
            raise LabError(
                f"{path}: an event at ts {ts[i]!r} has 'dur' {dur[i]!r} (must be a finite number >= 0)",
                "the trace is damaged; re-export it",
            )
    steps_ts = np.array([start for _, start in steps])
    if not np.isfinite(steps_ts).all():
        raise LabError(
            f"{path}: a ProfilerStep event has 'ts' {steps_ts[~np.isfinite(steps_ts)][0]!r}",
            "the trace is damaged; re-export it",
        )
    return OverlapEvents(
        kind=np.frombuffer(kind_of, dtype=np.int8)[keep],
        ts_us=np.frombuffer(ts_of)[keep],
        dur_us=np.frombuffer(dur_of)[keep],
        steps=sorted(steps, key=lambda s: s[1]),
        bubble_ts_us=np.frombuffer(bubble_ts),
        bubble_dur_us=np.frombuffer(bubble_dur),
        labels=sorted({labels[p] for p in overlap_pids if p in labels}),
    )


_KEPT_PREFIXES = ("ProfilerStep#", "hcom_receive")


def _event_times(e: Event | TimedEvent | TraceEvent, path: Path) -> tuple[float, float]:
    """(ts, dur) of a kept event: finite, dur >= 0 (missing dur = 0); anything else stops with the event."""
    raw_ts, raw_dur = (e.ts_us, e.dur_us) if isinstance(e, TraceEvent) else (e.ts, e.dur)
    where = f"event {e.name!r} at ts {raw_ts!r}"
    ts = trace_number(raw_ts, path, f"{where}: 'ts'")
    dur = trace_number(raw_dur, path, f"{where}: 'dur'")
    if ts is None:
        raise LabError(f"{path}: {where} has no 'ts'", "the trace is damaged; re-export it")
    if dur is not None and dur < 0:
        raise LabError(f"{path}: {where} has a negative 'dur' ({dur:g})", "the trace is damaged; re-export it")
    return ts, dur or 0.0
