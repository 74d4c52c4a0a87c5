"""The cluster view: every rank's step table side by side, the step verdict, the collectives, the slow rank.

Pure functions over a :class:`common.formats.cluster.ClusterView` (:func:`common.formats.cluster.load_cluster`
reads it): :func:`cluster_report` computes everything the view shows, once, and
:mod:`common.render.cluster` lays it out. The slow rank is :mod:`common.analyze.slow_rank`'s; a capture
with a parallel layout is judged within each group by :mod:`common.analyze.parallel_layout`. The
comparison with ``msprof-analyze cluster`` is :mod:`common.collect.msprof_analyze`'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from common.analyze import communication
from common.analyze.bounds import step as step_bound
from common.analyze.cluster_scale import SUMMARY_ABOVE_RANKS, Outlier, StepSpread, outliers, step_spreads
from common.analyze.parallel_layout import Layout, judge_groups, layout_lines, parallel_layout, stage_rows
from common.analyze.slow_rank import (
    Arrivals,
    RankSummaries,
    RankSummary,
    SlowRank,
    collective_arrivals,
    distinct_steps,
    find_slow_rank,
    rank_summaries,
)
from common.formats.cluster import ClusterView, Communication
from common.formats.rank_index import RankValues
from common.formats.records import StepTime
from common.verdict import Verdict


def check_step_sums(view: ClusterView, tolerance: float = 0.01) -> Verdict:
    """Computing + Communication(Not Overlapped) + Free = the step (Stage) on every rank and step."""
    worst = 0.0
    names = ("stage_us", "computing_us", "communication_not_overlapped_us", "free_us", "bubble_us")
    for block in view.steps.row_blocks(names):  # a block of rows at a time: memory bounded at any size
        stage = block["stage_us"]
        total = block["computing_us"] + block["communication_not_overlapped_us"] + block["free_us"]
        kept = stage != 0
        off = np.abs(total[kept] + block["bubble_us"][kept] - stage[kept]) / stage[kept]
        worst = max(worst, float(off.max())) if off.size else worst
    return Verdict(
        "step table adds up (every rank)",
        worst <= tolerance,
        f"|Computing + Communication(Not Overlapped) + Free + Bubble - Stage| <= {100 * worst:.3f}% of the step "
        f"(Stage: the step's length in step_trace_time; tolerance {100 * tolerance:.0f}%)",
    )


def _mean_kind(s: RankSummary) -> str:
    kind, parts, _ = step_bound.classify(s.computing_us, s.comm_not_overlapped_us, s.free_us)
    return f"mixed ({' + '.join(parts)})" if kind == "mixed" else kind


def cluster_step_lines(view: ClusterView) -> list[str]:
    """The step verdict over every rank's steps, with its hypothesis, what to try and the evidence."""
    from common.analyze.bounds import op as bounds

    summary = step_bound.summarize_blocks(view.steps.summary_blocks)
    if summary is None:
        return []
    verdict = step_bound.step_verdict(summary)
    if verdict.kind in ("host-bound", "compute-bound"):
        hint = bounds.run_hint(summary, None, None) + step_bound.preparing_note(summary)
    else:
        hint = step_bound.advice(summary, verdict)
    return [verdict.text, *hint]


def _uncaptured_text(comm: Communication) -> str:
    """The ranks of a group that the link matrix names but the capture does not hold."""
    captured = comm.splits.ranks()
    parts = []
    for group, members in sorted(comm.groups.items()):
        held = np.intersect1d(members, captured).tolist()
        if len(held) < len(members):
            parts.append(
                f"group {group[-6:]} has {len(members)} ranks ({members[0]}..{members[-1]}, "
                f"communication matrix), this capture holds {len(held)} "
                f"({', '.join(map(str, held))}): a rank that is not here cannot "
                "be named, and one of them can be the late peer"
            )
    return "; ".join(parts)


def _ratio_word(ratio: float) -> str:
    high = communication.WAIT_RATIO_HIGH
    return f"above {high:g}: it waits for a peer" if ratio > high else f"at most {high:g}: little waiting"


def communication_lines(comm: Communication) -> tuple[communication.CommVerdict, list[str], RankValues]:
    """The communication verdict, the lines around it (uncaptured ranks, notes) and each rank's wait ratio:
    :func:`rank_line` makes a rank's line when it is shown."""
    verdict = communication.step_verdict(comm)
    lines = [verdict.text]
    uncaptured = _uncaptured_text(comm)
    if uncaptured:
        lines.append(f"note: {uncaptured}")
    return verdict, lines + [f"note: {n}" for n in comm.notes], comm.splits.wait_ratios()


def rank_line(comm: Communication, rank: int) -> str:
    """One rank's line: the split of its ops' time and its main links."""
    split = comm.splits[rank]
    links = communication.main_links(communication.rank_links(split))
    return (
        f"rank {rank}: {split.ops} ops, elapse {split.elapse_ms:,.3f} ms = transit {split.transit_ms:,.3f} + wait "
        f"{split.wait_ms:,.3f} (sync {split.sync_ms:,.3f}) + idle {split.idle_ms:,.3f} ms; wait ratio "
        f"{split.wait_ratio:.2f}, sync ratio {split.sync_ratio:.2f} ({_ratio_word(split.wait_ratio)}); "
        + ("; ".join(communication.bandwidth_text(u) + f", {u.size_mb:,.1f} MB" for u in links) or "no link moved data")
    )


@dataclass
class ClusterReport:
    """What the cluster view shows, computed once; :mod:`common.render.cluster` lays it out."""

    view: ClusterView
    per_step: list[list[object]]
    summaries: RankSummaries  # each rank's median step, in rank order
    slow: SlowRank
    arrivals: Arrivals | None
    step_lines: list[str]
    comm_lines: list[str]  # the communication verdict and its notes
    comm_ratios: RankValues | None  # rank -> its wait ratio (None: no communication analysis)
    op_rows: list[list[object]]
    link_rows: list[list[object]]
    layout: Layout | None = None  # the parallel layout, when the ranks recorded one
    layout_lines: list[str] = field(default_factory=list)
    stage_rows: list[list[object]] = field(default_factory=list)
    group_rows: list[list[object]] = field(default_factory=list)
    spreads: list[StepSpread] = field(default_factory=list)  # per step, over the ranks
    slowest: list[Outlier] = field(default_factory=list)
    fastest: list[Outlier] = field(default_factory=list)

    @property
    def means(self) -> list[list[object]]:
        """Per rank, its median step's row (made when shown: a summarized view shows only its outliers)."""
        return list(self.mean_rows())

    def mean_rows(self) -> Iterator[list[object]]:
        """:attr:`means`, one row at a time."""
        for s in self.summaries:
            yield [
                s.rank,
                s.computing_us,
                s.comm_not_overlapped_us,
                s.communication_us,
                s.free_us,
                s.step_us,
                100 * s.comm_not_overlapped_us / s.step_us if s.step_us else 0.0,
                _mean_kind(s),
            ]

    def per_step_values(self) -> tuple[list[tuple[str, np.ndarray]], list[tuple[str, np.ndarray]]]:
        """Per step ("step N"), every rank's Computing + Free and its Communication(Not Overlapped), in rank order, as
        float64 arrays (from the columns, a group of steps at a time: no row is made)."""
        store = self.view.steps
        own_rows, wait_rows = [], []
        names = ("rank", "computing_us", "free_us", "communication_not_overlapped_us")
        for step, values in store.by_step(names, distinct_steps(store)):
            order = np.argsort(values["rank"], kind="stable")
            own_rows.append((f"step {step}", (values["computing_us"] + values["free_us"])[order]))
            wait_rows.append((f"step {step}", values["communication_not_overlapped_us"][order]))
        return own_rows, wait_rows

    def rank_lines(self, ranks: list[int] | None = None) -> list[str]:
        """The communication line of each of ``ranks`` (default: every rank's, in rank order)."""
        return list(self.iter_rank_lines(ranks))

    def iter_rank_lines(self, ranks: list[int] | None = None) -> Iterator[str]:
        """:meth:`rank_lines`, one at a time."""
        comm = self.view.communication
        return (rank_line(comm, r) for r in (self.comm_ratios or () if ranks is None else ranks))

    @property
    def summarized(self) -> bool:
        """More ranks than a table of every (step, rank) row can show usefully: the summary is shown instead."""
        return len(self.view.ranks) > SUMMARY_ABOVE_RANKS


PIPELINE_TRY = (
    "try (Communication(Not Overlapped)): here it is pipeline ranks waiting in P2P for a slower stage, "
    "not gradient buckets: balance the stages (see Parallel layout)"
)


PORTABLE_COMMUNICATION = (
    "communication analysis: none on the portable backend (gloo's trace gives each collective's start and length "
    "only, no Transit / Wait / Idle split as HCCL's does); who reached each collective last is read from the "
    "starts, in the arrival line of the ranks below"
)


def slow_rank_try(slow: SlowRank) -> str | None:
    """What to try when one rank is the one the others wait for: its remedy, not the overlap advice."""
    if slow.rank is None:
        return None
    if slow.reason == "computing":
        return (
            f"try (slow rank {slow.rank}): it computes longest and the others wait for it in the collective: "
            f"give it less work (rebalance the data or batch split, the layers of its stage, its experts' load) "
            f"or find why its device is slower (another job on it, a lower clock, a different SoC); overlap "
            f"tuning does not help while one rank holds the rest"
        )
    return (
        f"try (slow rank {slow.rank}): its own host keeps it longest (Free): its data loading, Python or "
        f"dispatch — prefetch and pin its data loader, bind its CPU cores, look for host syncs in its step; "
        f"the others wait for it in the collective"
    )


def _step_advice(
    step_lines: list[str],
    verdict: communication.CommVerdict | None,
    unbalanced_pipeline: bool = False,
    slow: SlowRank | None = None,
) -> list[str]:
    """The step verdict's lines; a communication verdict that is not "moving data" replaces the generic
    overlap advice (a faster link or bigger buckets do not help a rank that waits or idles), an unbalanced
    pipeline the communication advice (its ranks wait in P2P: DDP buckets do not fit), and a slow rank the
    communication advice (the others wait for that rank: rebalance it)."""
    fit = None
    if verdict is not None and verdict.kind not in ("moving data", "none"):
        fit = (
            "try: find why the late rank starts the collective late (its compute or host time before it) — "
            "the link is not the limit"
            if verdict.kind == "waiting"
            else "try: the op idles, not transfers: look at the host around it (Free, launches, synchronisation) "
            "and at the ranks of the group that this capture does not hold"
        )
    out = []
    for line in step_lines:
        if fit and line.startswith("try:"):
            line = fit
        elif unbalanced_pipeline and line.startswith("try (Communication"):
            line = PIPELINE_TRY
        elif slow is not None and slow.rank is not None and line.startswith("try (Communication"):
            line = slow_rank_try(slow)
        out.append(line)
    remedy = slow_rank_try(slow) if slow is not None and not unbalanced_pipeline else None
    if remedy and remedy not in out:  # a step verdict without a communication line: the slow rank's remedy still said
        tried = [i for i, line in enumerate(out) if line.startswith("try")]
        out.insert(tried[-1] + 1 if tried else len(out), remedy)
    return out


def link_matrix_rows(comm: Communication) -> list[list[object]]:
    """Per captured rank and peer: the transport and bandwidth of the op group's total bucket (``*-total``)."""
    rows = []
    for rank, links in sorted(comm.links.items()):
        for link in sorted(
            (x for x in links if x.bucket.endswith("-total") and x.src != x.dst),
            key=lambda x: (x.step, x.bucket, x.dst),
        ):
            rows.append(
                [
                    link.step,
                    link.bucket,
                    link.src,
                    link.dst,
                    link.transport,
                    link.size_mb,
                    link.time_ms,
                    link.bandwidth_gbs,
                ]
            )
    return rows


def iter_step_rows(view: ClusterView) -> Iterator[list[object]]:
    """Every (step, rank) row of the view's table, by step then rank: Step, Rank, Computing,
    Communication(Not Overlapped), Overlapped, Free, the step (their sum) and its bound. Made from the columns
    as they are asked for, a group of steps at a time (16,384 ranks of 20 steps: 330,000 rows, never all in
    memory at once)."""
    store = view.steps
    names = ("rank", "computing_us", "communication_not_overlapped_us", "overlapped_us", "free_us")
    for step, values in store.by_step(names, distinct_steps(store)):
        order = np.argsort(values["rank"], kind="stable")
        for rank, c, n, o, f in zip(*(values[name][order].tolist() for name in names)):
            row = StepTime(step, c, n, o, 0.0, f, 0.0, 0.0, None)
            yield [row.step, int(rank), c, n, o, f, row.total_us, step_bound.step_kind(row)]


def per_step_rows(view: ClusterView) -> list[list[object]]:
    """:func:`iter_step_rows`, as a list (a view of a few ranks shows every row)."""
    return list(iter_step_rows(view))


def cluster_report(view: ClusterView) -> ClusterReport:
    """Everything the cluster view shows: steps per rank, the step verdict, the slow rank, the collectives."""
    per_step = [] if len(view.ranks) > SUMMARY_ABOVE_RANKS else per_step_rows(view)  # the summary's rows: --out's CSV
    summaries = rank_summaries(view)
    comm = view.communication
    verdict, comm_lines, comm_ratios, op_rows, link_rows = None, [], None, [], []
    portable = (view.run_info or {}).get("backend") == "portable" or all(
        str(p.info.get("backend", "")).startswith("portable") for p in view.ranks
    )  # converted torch.profiler traces
    if comm is not None and not comm.splits and portable:
        comm_lines = [PORTABLE_COMMUNICATION]  # the lab's own portable capture: nothing is missing, said once
    elif comm is not None:
        verdict, comm_lines, comm_ratios = communication_lines(comm)
        op_rows = communication.op_rows(comm.ops_in_order())
        link_rows = link_matrix_rows(comm)
    layout = parallel_layout(view)
    lines, stages, groups, unbalanced = [], [], [], False
    if layout is None:
        slow = find_slow_rank(summaries, view.steps)
    else:  # the slow rank is judged within each group instead of over all ranks
        stages = stage_rows(view, layout, comm)
        lines, slow, unbalanced = layout_lines(layout, stages, judge_groups(layout, summaries), comm)
        groups = [[g.kind, g.name, ", ".join(map(str, g.ranks)), g.group_id, g.comm_group] for g in layout.groups]
    step_lines = _step_advice(cluster_step_lines(view), verdict, unbalanced, slow)
    slowest, fastest = outliers(summaries, layout)
    return ClusterReport(
        view,
        per_step,
        summaries,
        slow,
        collective_arrivals(view),
        step_lines,
        comm_lines,
        comm_ratios,
        op_rows,
        link_rows,
        layout,
        lines,
        [r.cells() for r in stages],
        groups,
        step_spreads(view.steps),
        slowest,
        fastest,
    )
