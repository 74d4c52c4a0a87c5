"""The advisor: msprof-analyze advisor's rules over one capture, each with its figures and its fix.

Every rule of msprof-analyze's ``advisor all`` (26.2.0) has one function here, grouped by what it
reads: :mod:`.environment`, :mod:`.operators` (the task table), :mod:`.aicore` (Cube / FA / Vector
operator performance), :mod:`.schedule` (the timeline's framework and CANN events),
:mod:`.communication` (the communication analysis and HCCL tasks) and :mod:`.cluster` (across
ranks). Each takes the records of :mod:`common.formats.advice_input` and returns a
:class:`Finding`: ``found`` (with the ops, sizes, counts and ratios that fired it), ``clear`` (it
ran and nothing fired) or ``not run`` (the capture lacks its data: which file or level would hold it).
The threshold of each rule names the advisor file it comes from; where the lab's figure differs
from the advisor's (e.g. the advisor counts communication.json's ``Total Op Info`` summary as an op),
the finding says both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

FOUND, CLEAR, NOT_RUN = "found", "clear", "not run"


@dataclass
class Finding:
    rule: str  # the advisor's category, e.g. "Byte Alignment Analysis"
    status: str  # FOUND / CLEAR / NOT_RUN
    text: str  # the key figures in one paragraph, or why the rule did not run
    threshold: str  # the rule's condition and the advisor file it comes from
    remedy: str = ""
    fix: str | None = None  # the lab's finding -> fix pair (nox -s fix --pairs NAME), or the docs page
    figures: dict = field(default_factory=dict)  # the key figures, for --json
    header: list[str] = field(default_factory=list)
    rows: list[list[object]] = field(default_factory=list)  # the top items, largest first
    ranks: list[int] = field(default_factory=list)  # the ranks where it was found


def found(rule: str, text: str, threshold: str, **kw) -> Finding:
    return Finding(rule, FOUND, text, threshold, **kw)


def clear(rule: str, text: str, threshold: str, figures: dict | None = None) -> Finding:
    return Finding(rule, CLEAR, text, threshold, figures=figures or {})


def not_run(rule: str, why: str, threshold: str) -> Finding:
    return Finding(rule, NOT_RUN, why, threshold)


def merge_ranks(per_rank: list[tuple[int | None, Finding]]) -> Finding:
    """One rule's findings on several ranks as one: the first rank where it fired speaks (its figures, named as its),
    the others are counted."""
    if len(per_rank) == 1:
        rank, one = per_rank[0]
        if one.status == FOUND and rank is not None:
            one.ranks = [rank]
        return one
    hits = [(r, f) for r, f in per_rank if f.status == FOUND]
    if not hits:
        ran = [f for _, f in per_rank if f.status == CLEAR]
        return ran[0] if ran else per_rank[0][1]
    rank, first = hits[0]
    first.ranks = [r for r, _ in hits if r is not None]
    first.figures = {**first.figures, "per_rank": {str(r): f.figures for r, f in hits}}
    first.text = f"rank {rank} (found on {len(hits)} of {len(per_rank)} ranks; its figures): {first.text}"
    return first


RankRule = Callable[..., Finding]  # (RankInput) -> Finding
