"""The parallel layout of a cluster: its groups from parallel_group_info, pipeline stages, slow ranks within a group.

Pure functions over a :class:`common.formats.cluster.ClusterView` already read (each rank's
``profiler_metadata.json`` or META_DATA, its steps and communication analysis).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from common.analyze.slow_rank import RankSummary, SlowRank
from common.formats.cluster import ClusterView, Communication, step_order
from common.formats.metadata import LAYOUT_KINDS

# The kinds of group (common.formats.metadata.LAYOUT_KINDS); groups of one rank are kept for the sizes but judge
# nothing.
SIZE_ARGS = {
    "TP": "tensor_model_parallel_size",
    "PP": "pipeline_model_parallel_size",
    "DP": "data_parallel_size",
    "CP": "context_parallel_size",
    "EP": "expert_model_parallel_size",
}
# msprof-analyze's reading of cluster_step_trace_time.csv: stage and rank values "should stay level:
# the largest minus the smallest within 5%", else a slow card or an unbalanced stage (docs/zh/
# recipe_output_format_introduct.md, "cluster_step_trace_time.csv"). Used for the stages' Computing
# and as the floor of the within-group slow-rank threshold.
LEVEL_SHARE = 0.05
# Within a group that does the same work (DP, TP, CP, EP), a rank is slow when its Computing + Free
# exceeds the median of the group's other ranks by more than this many times the typical such excess
# in the capture's other same-work groups (the spread of the data, measured where the rank is not:
# a slow rank cannot hide itself), and by more than LEVEL_SHARE of that median.
SLOW_IN_GROUP_MADS = 3.0


def group_hash(group_id: str) -> str:
    """The number communication.json writes after ``@`` for a group torch_npu names ``group_id``.

    torch_npu writes the group's name into parallel_group_info and a hash of it into the op names;
    msprof-analyze joins them with two 32-bit polynomial hashes of the name's characters (base 29
    and base 131), high and low word (``hccl_sum.py``, ``double_hash``). ``group_name_19`` ->
    ``3985310405473756128`` on the real 4-rank capture.
    """
    high = low = 0
    for ch in group_id:
        high = (high * 29 + ord(ch)) & 0xFFFFFFFF
        low = (low * 131 + ord(ch)) & 0xFFFFFFFF
    return str(high << 32 | low)


@dataclass(frozen=True)
class ParallelGroup:
    kind: str  # TP, PP, DP, CP, EP
    name: str  # Megatron's: tp, pp, dp, dp_cp, cp, exp
    ranks: tuple[int, ...]
    group_id: str
    comm_group: str  # as communication.json writes it after "@"


@dataclass(frozen=True)
class Layout:
    """The ranks' parallel groups, from every rank's metadata (one group listed once)."""

    sizes: dict[str, int]  # kind -> size, from distributed_args (or the groups)
    groups: list[ParallelGroup]
    source: str

    def of(self, kind: str) -> list[ParallelGroup]:
        return [g for g in self.groups if g.kind == kind]

    @property
    def stages(self) -> list[tuple[int, ...]]:
        """Pipeline stage s: the ranks at index s of their PP group (stage 0 first)."""
        pp = self.of("PP")
        if not pp or max(len(g.ranks) for g in pp) < 2:
            return []
        depth = max(len(g.ranks) for g in pp)
        return [tuple(sorted(g.ranks[s] for g in pp if s < len(g.ranks))) for s in range(depth)]


def parallel_layout(view: ClusterView) -> Layout | None:
    """The layout every rank recorded; None when no rank has distributed_args or parallel_group_info."""
    record = view.layout
    if not record.recorded:
        return None
    groups = {
        (kind, ranks): ParallelGroup(kind, name, ranks, group_id, group_hash(group_id))
        for (kind, ranks), (name, group_id) in record.groups.items()
    }
    args = record.args or {}
    sizes = {}
    for kind, key in SIZE_ARGS.items():
        if isinstance(args.get(key), int):
            sizes[kind] = args[key]
        elif any(k == kind for k, _ in groups):
            sizes[kind] = max(len(r) for k, r in groups if k == kind)
    missing = sorted(record.missing)
    source = record.source.rsplit("/", 1)[-1]
    if missing:
        source += f" (ranks {', '.join(map(str, missing))} recorded none)"
    return Layout(sizes, sorted(groups.values(), key=lambda g: (list(LAYOUT_KINDS).index(g.kind), g.ranks)), source)


@dataclass(frozen=True)
class StageRow:
    """One pipeline stage in one step (µs): msprof-analyze's stage row (the maximum over the stage's ranks)
    plus the P2P ops of its ranks (mean over them, from communication.json / analysis.db)."""

    step: int | None
    stage: int
    ranks: tuple[int, ...]
    computing_us: float  # max over the ranks
    free_us: float  # max
    comm_not_overlapped_us: float  # max
    bubble_us: float  # max: step_trace_time's Bubble (receive ops only)
    p2p_ops: int  # per rank
    p2p_us: float  # P2P elapse, mean over the ranks
    p2p_wait_us: float
    p2p_idle_us: float
    p2p_transit_us: float

    def cells(self) -> list[object]:
        return [
            self.step,
            self.stage,
            ", ".join(map(str, self.ranks)),
            self.computing_us,
            self.free_us,
            self.comm_not_overlapped_us,
            self.bubble_us,
            self.p2p_ops,
            self.p2p_us,
            self.p2p_wait_us,
            self.p2p_idle_us,
        ]


def stage_rows(view: ClusterView, layout: Layout, comm: Communication | None) -> list[StageRow]:
    """Per step and pipeline stage: the stage's Computing, Free and Bubble, and its ranks' P2P time."""
    p2p = comm.p2p if comm else {}  # (step, rank) -> the rank's P2P ops in that step
    out = []
    for step in sorted({s.step for rows in view.steps.values() for s in rows}, key=step_order):
        for stage, ranks in enumerate(layout.stages):
            rows = [s for r in ranks for s in view.steps.get(r, []) if s.step == step]
            if not rows:
                continue
            ops = [p2p.get((step, r), []) for r in ranks]
            n = len(ranks)
            out.append(
                StageRow(
                    step,
                    stage,
                    ranks,
                    max(s.computing_us for s in rows),
                    max(s.free_us for s in rows),
                    max(s.communication_not_overlapped_us for s in rows),
                    max(s.bubble_us for s in rows),
                    max(len(o) for o in ops),
                    *(
                        1000 * sum(getattr(t, f) for o in ops for t in o) / n
                        for f in ("elapse_ms", "wait_ms", "idle_ms", "transit_ms")
                    ),
                )
            )
    return out


@dataclass(frozen=True)
class GroupJudgement:
    """A same-work group's ranks against each other (median Computing + Free, µs)."""

    group: ParallelGroup
    own_us: dict[int, float]
    spread_us: float  # the typical excess in the other same-work groups
    threshold_us: float
    slow: int | None

    @property
    def gap(self) -> tuple[int, int, float]:
        high = max(self.own_us, key=self.own_us.get)
        low = min(self.own_us, key=self.own_us.get)
        return high, low, self.own_us[high] - self.own_us[low]


def _excess(own: dict[int, float], ranks: tuple[int, ...], rank: int) -> float:
    """A rank's Computing + Free minus the median of its group's other ranks."""
    return own[rank] - statistics.median(own[r] for r in ranks if r != rank)


def judge_groups(layout: Layout, summaries: list[RankSummary]) -> list[GroupJudgement]:
    """Every DP / TP / CP / EP group of two or more ranks: each rank against the median of the others.

    The threshold is stated from the data: SLOW_IN_GROUP_MADS x the median |excess| of the ranks of
    the other same-work groups (none: 0), and at least LEVEL_SHARE of the others' median.
    """
    own = {s.rank: s.own_us for s in summaries}
    groups = [g for g in layout.groups if g.kind != "PP" and len(g.ranks) > 1 and all(r in own for r in g.ranks)]
    out = []
    for g in groups:
        elsewhere = [abs(_excess(own, o.ranks, r)) for o in groups if o is not g for r in o.ranks]
        spread = statistics.median(elsewhere) if elsewhere else 0.0
        excess = {r: _excess(own, g.ranks, r) for r in g.ranks}
        worst = max(excess, key=excess.get)
        median = statistics.median(own[r] for r in g.ranks if r != worst)
        threshold = max(SLOW_IN_GROUP_MADS * spread, LEVEL_SHARE * median)
        out.append(
            GroupJudgement(
                g, {r: own[r] for r in g.ranks}, spread, threshold, worst if excess[worst] > threshold else None
            )
        )
    return out


def _ranks_text(ranks: tuple[int, ...]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"


def layout_lines(
    layout: Layout, stages: list[StageRow], judged: list[GroupJudgement], comm: Communication | None
) -> tuple[list[str], SlowRank, bool]:
    """The layout's verdict and advice: the pipeline's balance, then each same-work group's slow rank.

    Returns the lines, the slow-rank finding that replaces the all-ranks one, and whether the
    pipeline is unbalanced (then communication time is P2P waiting, not DDP buckets).
    """
    sizes = " x ".join(f"{k} {v}" for k, v in layout.sizes.items())
    lines = [
        f"layout ({layout.source}): {sizes}; "
        + "; ".join(
            f"{kind} groups {', '.join('[' + ', '.join(map(str, g.ranks)) + ']' for g in layout.of(kind))}"
            for kind in LAYOUT_KINDS
            if layout.of(kind)
        )
    ]
    unbalanced = False
    for step in sorted({r.step for r in stages}, key=step_order):
        rows = [r for r in stages if r.step == step]
        if len(rows) < 2:
            continue
        slow, fast = max(rows, key=lambda r: r.computing_us), min(rows, key=lambda r: r.computing_us)
        share = (slow.computing_us - fast.computing_us) / slow.computing_us if slow.computing_us else 0.0
        where = f"step {step}: " if step is not None else ""
        waits = ", ".join(
            f"stage {r.stage} {r.p2p_us:,.1f} us (wait {r.p2p_wait_us:,.1f}, idle {r.p2p_idle_us:,.1f})" for r in rows
        )
        head = (
            f"{where}pipeline stage {slow.stage} ({_ranks_text(slow.ranks)}) computes {slow.computing_us:,.1f} us, "
            f"stage {fast.stage} ({_ranks_text(fast.ranks)}) {fast.computing_us:,.1f} us: a difference of "
            f"{100 * share:.1f}% of the larger (level within {100 * LEVEL_SHARE:.0f}%: msprof-analyze's "
            f"guidance for stage rows)"
        )
        p2p = (
            f"; P2P per rank (send/recv/batchSendRecv, {comm.source}): {waits}"
            if comm and any(r.p2p_ops for r in rows)
            else "; no P2P ops in the communication analysis"
        )
        bubble = max(r.bubble_us for r in rows)
        bubble_text = (
            f"; Bubble (step_trace_time: receive ops only) {bubble:,.1f} us"
            if bubble
            else "; step_trace_time's Bubble is 0: it counts receive ops only, and this pipeline's P2P "
            "is in the ops above"
        )
        if share > LEVEL_SHARE:
            unbalanced = True
            lines.append(
                f"UNBALANCED PIPELINE — {head}{p2p}{bubble_text}. The ranks of the faster stage wait in "
                f"P2P for the slower one"
            )
            lines.append(
                f"try (pipeline): move layers from stage {slow.stage} to stage {fast.stage} until their "
                f"Computing is level (an uneven split: Megatron-LM's --decoder-first-pipeline-num-layers / "
                f"--decoder-last-pipeline-num-layers), or split the work finer with virtual pipeline stages "
                f"(interleaved 1F1B); the link is not the limit when P2P time is wait and idle, not transit"
            )
        else:
            lines.append(f"pipeline stages are level — {head}{p2p}{bubble_text}")
    slow_rank = SlowRank(None, None, "")
    texts = []
    for j in judged:
        high, low, gap = j.gap
        name = f"{j.group.kind} group [{', '.join(map(str, j.group.ranks))}]"
        if j.slow is not None:
            median = statistics.median(v for r, v in j.own_us.items() if r != j.slow)
            texts.append(
                f"{name}: rank {j.slow} is slow — Computing + Free {j.own_us[j.slow]:,.1f} us vs "
                f"{median:,.1f} us (median of the others; +{j.own_us[j.slow] - median:,.1f} us, threshold "
                f"{j.threshold_us:,.1f} us)"
            )
            if slow_rank.rank is None:
                advice = (
                    "its peers wait for it in the data-parallel gradient collectives: look at that rank's own "
                    "compute and host time (Free), not the link"
                    if j.group.kind == "DP"
                    else "the group's collectives (all-reduce / all-gather of activations) wait for it: every "
                    "layer waits once, so look at that rank's device and its links"
                )
                slow_rank = SlowRank(j.slow, "computing", f"slowest rank within its group: {texts[-1]}; {advice}")
        else:
            texts.append(
                f"{name}: level, largest gap {gap:,.1f} us (rank {high} vs {low}), threshold "
                f"{j.threshold_us:,.1f} us (spread elsewhere {j.spread_us:,.1f} us)"
            )
    threshold = (
        f"slow rank judged within each group of the same work (DP, TP, CP, EP): a rank is slow when its "
        f"Computing + Free exceeds the median of its group's other ranks by more than "
        f"{SLOW_IN_GROUP_MADS:g} x the median such excess in the other groups, and by more than "
        f"{100 * LEVEL_SHARE:.0f}% of that median"
    )
    if judged:
        lines.append(f"{threshold}: " + "; ".join(texts))
        if slow_rank.rank is None:
            slow_rank = SlowRank(
                None,
                None,
                "no slow rank within any group: "
                + "; ".join(texts)
                + ("; the ranks differ between pipeline stages (see Parallel layout)" if stages else ""),
            )
    else:
        slow_rank = SlowRank(None, None, "no group of the same work with two or more ranks to compare")
    if layout.sizes.get("TP", 1) > 1:
        lines.append(
            "tensor parallel: every layer's TP collectives sit on the critical path — a slow TP rank or link "
            "shows in those collectives (see the ops above), and TP groups should stay within one node"
        )
    return lines, slow_rank, unbalanced
