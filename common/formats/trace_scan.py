"""The byte scanner of timelines: only the events the step table reads, found in a memory map of the file.

A gigabyte trace_view.json is not decoded whole: its bytes are searched for the wanted event
names and only those events are decoded (:func:`scan_blocks`). Where the scanner cannot vouch
for the file it raises :class:`Unsure`, and :func:`common.formats.readers.read_overlap` decodes
the whole trace instead (:func:`common.formats.chrome_trace.iter_trace`); the numbers are the same.
"""

from __future__ import annotations

import codecs
import mmap
import re
from collections.abc import Iterator
from pathlib import Path

from common.formats.chrome_trace import EVENT_BOUNDARY, TIMED_DECODER, TimedEvent
from common.formats.engine import msgspec

SCAN_BLOCK_BYTES = 16 << 20  # the scanner looks at this much of the map at a time, then lets its pages go
SCAN_BATCH = 16_384  # events decoded (and handed on) at a time
# The events the step table reads, found by their name: Overlap Analysis spans, steps, receives, process metadata.
_WANTED = re.compile(
    rb'"name"[ \t\r\n]*:[ \t\r\n]*"(?:Computing"|Communication|Free"|ProfilerStep#|hcom_receive|process_name"'
    rb'|process_labels")'
)
_SPACE = b" \t\r\n"


class Unsure(Exception):
    """The byte scanner met something it cannot vouch for: the trace is decoded whole instead."""


def scan_overlap_events(path: Path) -> list[list[TimedEvent]] | None:
    """Every block :func:`scan_blocks` yields, or None where it gives up (for tests and tools)."""
    try:
        return list(scan_blocks(path))
    except Unsure:
        return None


def scan_blocks(path: Path) -> Iterator[list[TimedEvent]]:
    """The events :func:`overlap_events` keeps, decoded from byte slices of the file, a window at a time.

    A JSON array of events is searched for ``"name": "<wanted>"``; each hit's event runs from the
    ``{`` that opens it (the first one before the hit that follows ``,`` or ``[``, so an ``args``
    object is passed over) to the next ``}, {``. Only those slices are decoded, with the typed
    decoder. Anything unexpected raises :class:`Unsure`, and the caller decodes the whole trace: not an
    array, no closing ``]``, a slice that does not decode as exactly one event (a cut inside a
    string or a nested object), a time that is not a number. Not seen: a wanted name written with
    JSON escapes, or an event-like object nested in another event's args.
    """
    try:
        size = path.stat().st_size
        f = path.open("rb")
    except OSError:
        raise Unsure
    with f:
        if size == 0:
            raise Unsure
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            head = mm[: min(size, 4096)]
            body = head.removeprefix(codecs.BOM_UTF8)
            tail = mm[max(0, size - 4096) :].rstrip(_SPACE)
            if not body.lstrip(_SPACE).startswith(b"[") or not tail.endswith(b"]"):
                raise Unsure
            last = size - (len(mm[max(0, size - 4096) :]) - len(tail)) - 1  # offset of the closing ']'
            previous = -1
            find, rfind, boundary = mm.find, mm.rfind, EVENT_BOUNDARY.search
            for window in range(0, last, SCAN_BLOCK_BYTES):
                slices = []
                stop = window + SCAN_BLOCK_BYTES
                for hit in _WANTED.finditer(mm, window, min(stop + 128, last)):
                    at = hit.start()
                    if at >= stop:
                        break
                    start = rfind(b"{", 0, at)
                    if start < 1 or mm[start - 1] not in b",[":  # whitespace before it, or an args object
                        start = _event_start(mm, at)
                        if start is None:
                            raise Unsure
                    if start == previous:  # a second wanted name in the same event
                        continue
                    previous = start
                    end = find(b"}", at, last) + 1
                    if end == 0 or find(b"{", start + 1, end) >= 0:  # the event holds an object (args)
                        match = boundary(mm, at, last)
                        end = match.start() + 1 if match else last
                    slices.append(mm[start:end])
                    if len(slices) >= SCAN_BATCH:
                        yield _decoded(slices)
                        slices = []
                if slices:
                    yield _decoded(slices)
                _release(mm, window + SCAN_BLOCK_BYTES - (1 << 20))


def _decoded(slices: list[bytes]) -> list[TimedEvent]:
    """The events of ``slices``, each of which must decode as exactly one event."""
    try:
        events = TIMED_DECODER.decode(b"[" + b",".join(slices) + b"]")
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise Unsure from None
    if len(events) != len(slices):
        raise Unsure
    return events


def _event_start(mm: mmap.mmap, at: int) -> int | None:
    """Offset of the ``{`` that opens the top-level event holding byte ``at``, or None."""
    start = at
    while True:
        start = mm.rfind(b"{", 0, start)
        if start < 0:
            return None
        before = start - 1
        while before >= 0 and mm[before] in _SPACE:
            before -= 1
        if before < 0:
            return None
        if mm[before] in b",[":
            return start


def _release(mm: mmap.mmap, end: int) -> None:
    """Drop the map's pages before ``end`` from this process (they stay in the page cache)."""
    end -= end % mmap.PAGESIZE
    if end > 0 and hasattr(mm, "madvise"):
        try:
            mm.madvise(mmap.MADV_DONTNEED, 0, min(end, len(mm) - len(mm) % mmap.PAGESIZE))
        except (OSError, ValueError):
            pass
