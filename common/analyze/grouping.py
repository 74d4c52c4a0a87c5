"""The tasks of a profile grouped as the run made them: per forward window, per step, per execute; and the op types
of each group (what the record checks compare)."""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter

from common.formats.records import OpStat, Task
from common.formats.writers import aggregate_op_statistic


def tasks_in(tasks: list[Task], windows: list[tuple[float, float]]) -> list[list[Task]]:
    """The tasks that start inside each window (start, end µs), one list per window."""
    ordered = sorted(tasks, key=lambda t: t.start_us)
    starts = [t.start_us for t in ordered]
    return [ordered[bisect_left(starts, lo) : bisect_left(starts, hi)] for lo, hi in windows]


def measured_forward_groups(tasks: list[Task], windows: list[tuple[float, float]], warmup: int) -> list[list[Task]]:
    """The tasks of each measured forward (the windows after the ``warmup`` first), one list per forward."""
    return tasks_in(tasks, windows[warmup:]) if len(windows) > warmup else []


def measured_forward_stats(tasks: list[Task], windows: list[tuple[float, float]], warmup: int) -> list[OpStat] | None:
    """op_statistic of the tasks inside the measured forwards' ranges (the windows after the ``warmup`` first):
    the forward time of a run that marks its forwards, without set-up and warm-up; None when it marked none."""
    if len(windows) <= warmup:
        return None
    return aggregate_op_statistic([t for inside in tasks_in(tasks, windows[warmup:]) for t in inside])


def records_in(tasks: list[Task], windows: list[tuple[float, float]]) -> list[Counter[str]]:
    """The op types of the tasks that start inside each window (start, end µs), one multiset per window."""
    return [Counter(t.op_type for t in inside) for inside in tasks_in(tasks, windows)]


def records_by_step(tasks: list[Task]) -> list[Counter[str]]:
    """The op types of each recorded step (tasks with a Step Id), in step order."""
    return [Counter(t.op_type for t in group) for group in tasks_by_step(tasks)]


def tasks_by_step(tasks: list[Task]) -> list[list[Task]]:
    """The tasks of each recorded step (those with a Step Id), in step order: one group per step."""
    steps: dict[int, list[Task]] = {}
    for t in tasks:
        if t.step_id is not None:
            steps.setdefault(t.step_id, []).append(t)
    return [steps[k] for k in sorted(steps)]


def tasks_by_execute(tasks: list[Task], executes: int | None) -> list[list[Task]] | None:
    """A graph run ``executes`` times, its tasks in start order cut into equal consecutive executes (every
    execute of one graph runs the same tasks); None when the count does not divide evenly."""
    if not executes or not tasks or len(tasks) % executes:
        return None
    ordered, size = sorted(tasks, key=lambda t: t.start_us), len(tasks) // executes
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]
