"""The step table rebuilt from a timeline: step_trace_time rows from trace_view's Overlap Analysis events.

torch_npu and msprof-analyze compute step_trace_time.csv this way; the lab does the same when
a capture has a timeline but no step table.
"""

from __future__ import annotations

import math
from pathlib import Path

from common.formats.readers import overlap_events
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
    device = next((label.split()[1] for label in overlap.labels if label.startswith("NPU ") and len(label.split()) > 1),
                  "host" if "CPU" in overlap.labels else None)
    ends = overlap.ts_us + overlap.dur_us
    starts = [start for _, start in overlap.steps]
    ranges = [(step, start, starts[i + 1] if i + 1 < len(starts) else math.inf)
              for i, (step, start) in enumerate(overlap.steps)] or [(None, -math.inf, math.inf)]
    rows = []
    for step, start, end in ranges:
        inside = (overlap.ts_us >= start) & (overlap.ts_us < end)
        if not inside.any():
            continue
        total = [float(overlap.dur_us[inside & (overlap.kind == k)].sum()) for k in range(len(OVERLAP_EVENTS))]
        computing, communication, not_overlapped, free = total
        in_step = (overlap.bubble_ts_us >= start) & (overlap.bubble_ts_us < end)
        bubble = float(overlap.bubble_dur_us[in_step].sum())
        first = float(overlap.ts_us[inside].min())
        rows.append(StepTime(
            step=step, computing_us=computing, communication_not_overlapped_us=not_overlapped,
            overlapped_us=communication - not_overlapped, communication_us=communication, free_us=free,
            stage_us=float(ends[inside].max()) - first - bubble, bubble_us=bubble,
            preparing_us=first - start if step is not None else None, device_id=device,
        ))
    return rows


def overlap_step_time(events: list[TraceEvent]) -> StepTime | None:
    """One step_trace_time row for a whole timeline (ProfilerStep ranges ignored); None without Overlap Analysis."""
    whole = [e for e in events if not e.name.startswith("ProfilerStep#")]
    rows = overlap_step_times(overlap_events([whole], Path("<events>")))
    return rows[0] if rows else None
