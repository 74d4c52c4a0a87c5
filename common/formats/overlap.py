"""The step table rebuilt from a timeline: step_trace_time rows from trace_view's Overlap Analysis events.

torch_npu and msprof-analyze compute step_trace_time.csv this way; the lab does the same when
a capture has a timeline but no step table.
"""

from __future__ import annotations

import math
from pathlib import Path

from common.formats.engine import np
from common.formats.chrome_trace import overlap_events
from common.formats.records import OVERLAP_EVENTS, OverlapEvents, StepTime, TraceEvent


def overlap_step_times(overlap: OverlapEvents) -> list[StepTime]:
    """step_trace_time rows summed from a timeline's ``Overlap Analysis`` events (the one computation).

    torch_npu builds step_trace_time.csv from these events: Computing, Communication,
    Communication(Not Overlapped) and Free are the summed durations of the same-named events,
    Bubble of the ``hcom_receive*`` events, Overlapped = Communication - Not Overlapped, Stage =
    first to last event - Bubble. With ProfilerStep#N events each event counts in the step
    whose start is the last one at or before it (the device runs behind the host, so a step
    lasts until the next one starts; the last step is open-ended) and Preparing = first event -
    step start; events before the first step are not counted. Without ProfilerStep events the
    whole timeline is one row with an empty Step and no Preparing, as torch_npu writes it when
    no schedule ran. Empty when the timeline has no Overlap Analysis events.
    """
    if not len(overlap.ts_us):
        return []
    device = next(
        (label.split()[1] for label in overlap.labels if label.startswith("NPU ") and len(label.split()) > 1),
        "host" if "CPU" in overlap.labels else None,
    )
    ends = overlap.ts_us + overlap.dur_us
    starts = np.array([start for _, start in overlap.steps], dtype=np.float64)
    kinds = len(OVERLAP_EVENTS)
    if len(starts) > 1 and bool((np.diff(starts) < 0).any()):  # steps not in time order: one mask per step
        return _step_times_by_mask(overlap, device, ends)
    if len(starts):
        ranges = [(step, start) for step, start in overlap.steps]
        # The step of an event: the last one starting at or before it (-1: before the first step).
        step_of = np.searchsorted(starts, overlap.ts_us, side="right") - 1
        bubble_of = np.searchsorted(starts, overlap.bubble_ts_us, side="right") - 1
    else:
        ranges = [(None, -math.inf)]
        step_of = np.zeros(len(overlap.ts_us), dtype=np.int64)
        bubble_of = np.zeros(len(overlap.bubble_ts_us), dtype=np.int64)
    # Events grouped by (step, kind), each group in timeline order: a group's sum adds the same
    # numbers in the same order as summing the group where it lies in the timeline.
    key = step_of * kinds + overlap.kind.astype(np.int64)
    order = np.argsort(key, kind="stable")
    key, durations = key[order], overlap.dur_us[order]
    by_step = np.argsort(step_of, kind="stable")
    step_sorted = step_of[by_step]
    bubble_order = np.argsort(bubble_of, kind="stable")
    bubble_sorted, bubble_durations = bubble_of[bubble_order], overlap.bubble_dur_us[bubble_order]
    rows = []
    for i, (step, start) in enumerate(ranges):
        lo, hi = np.searchsorted(step_sorted, [i, i + 1])
        if lo == hi:
            continue
        members = by_step[lo:hi]
        bounds = np.searchsorted(key, np.arange(i * kinds, (i + 1) * kinds + 1))
        total = [float(durations[bounds[k] : bounds[k + 1]].sum()) for k in range(kinds)]
        computing, communication, not_overlapped, free = total
        b_lo, b_hi = np.searchsorted(bubble_sorted, [i, i + 1])
        bubble = float(bubble_durations[b_lo:b_hi].sum())
        first = float(overlap.ts_us[members].min())
        rows.append(
            StepTime(
                step=step,
                computing_us=computing,
                communication_not_overlapped_us=not_overlapped,
                overlapped_us=communication - not_overlapped,
                communication_us=communication,
                free_us=free,
                stage_us=float(ends[members].max()) - first - bubble,
                bubble_us=bubble,
                preparing_us=first - start if step is not None else None,
                device_id=device,
            )
        )
    return rows


def _step_times_by_mask(overlap: OverlapEvents, device: str | None, ends: np.ndarray) -> list[StepTime]:
    starts = [start for _, start in overlap.steps]
    rows = []
    for i, (step, start) in enumerate(overlap.steps):
        end = starts[i + 1] if i + 1 < len(starts) else math.inf
        inside = (overlap.ts_us >= start) & (overlap.ts_us < end)
        if not inside.any():
            continue
        total = [float(overlap.dur_us[inside & (overlap.kind == k)].sum()) for k in range(len(OVERLAP_EVENTS))]
        computing, communication, not_overlapped, free = total
        in_step = (overlap.bubble_ts_us >= start) & (overlap.bubble_ts_us < end)
        bubble = float(overlap.bubble_dur_us[in_step].sum())
        first = float(overlap.ts_us[inside].min())
        rows.append(
            StepTime(
                step=step,
                computing_us=computing,
                communication_not_overlapped_us=not_overlapped,
                overlapped_us=communication - not_overlapped,
                communication_us=communication,
                free_us=free,
                stage_us=float(ends[inside].max()) - first - bubble,
                bubble_us=bubble,
                preparing_us=first - start,
                device_id=device,
            )
        )
    return rows


def overlap_step_time(events: list[TraceEvent]) -> StepTime | None:
    """One step_trace_time row for a whole timeline (ProfilerStep ranges ignored); None without Overlap Analysis."""
    whole = [e for e in events if not e.name.startswith("ProfilerStep#")]
    rows = overlap_step_times(overlap_events([whole], Path("<events>")))
    return rows[0] if rows else None
