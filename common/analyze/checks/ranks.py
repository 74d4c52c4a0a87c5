"""The checks of a run on several ranks (mode 04's DDP run, common/modes/pytorch/ddp.py): the same collectives on
every rank, the same weights as one process, the slow rank named."""

from __future__ import annotations

from common.formats.communication import RankCollectives
from common.verdict import Verdict, not_applicable

# fp32 on both sides; the sums run in a different order (per-rank shards, then the all-reduce),
# so the weights agree to rounding: ~1e-7 relative on norms of ~20.
PARAM_NORM_RTOL = 1e-5


def check_collectives(found: RankCollectives) -> Verdict:
    """Every rank ran the same collectives in every step (common.formats.communication.rank_collectives:
    communication.json, HCCL schema, or a database's COMMUNICATION_OP rows)."""
    if found.missing is not None:
        return Verdict("same collectives on every rank", False, f"{found.missing} missing")
    per_rank = found.per_rank
    first = per_rank[found.first_rank]
    counts = sorted({len(v) for v in first.values()})
    ok = bool(first) and all(v == first for v in per_rank.values()) and counts != [0]
    return Verdict(
        "same collectives on every rank",
        ok,
        f"{len(first)} steps x {'/'.join(map(str, counts))} collective(s) per step in {found.source} on rank "
        f"{found.first_rank}; {'identical' if ok else 'NOT identical'} on all {len(per_rank)} ranks",
    )


def check_params(
    statuses: dict[int, dict], reference: list[float], how: str = "one process on the global batch"
) -> Verdict:
    """Every rank ends with bit-identical weights, equal (within rounding) to a one-process reference (``how``)."""
    digests = {s["params"]["sha256"] for s in statuses.values()}
    norms = statuses[0]["params"]["norms"]
    worst = max(abs(a - b) / abs(b) for a, b in zip(norms, reference))
    return Verdict(
        "weights identical on every rank and equal to the single-process reference",
        len(digests) == 1 and worst <= PARAM_NORM_RTOL,
        f"{len(digests)} distinct sha256 over {len(statuses)} ranks; parameter norms vs {how}: largest relative "
        f"difference {worst:.2e} (tolerance {PARAM_NORM_RTOL:g})",
    )


def check_slow_rank(slow, arrivals, slow_rank: int, slow_factor: int) -> Verdict:
    """The rank given ``slow_factor`` x the work is the one the view blames, for its compute, and the one the others
    waited for at the collectives (longest in all: how often a rank is last by a few µs says nothing).

    ``slow``: common.analyze.slow_rank.find_slow_rank's answer; ``arrivals``: collective_arrivals' (or None).
    """
    last = arrivals.holder() if arrivals else None
    name = "the cluster view names the slow rank"
    given = f"rank {slow_rank} was given {slow_factor}x its local batch"
    arrived = (
        "the rank the others waited for longest at the collectives: unknown"
        if last is None
        else f"the rank the others waited for longest at the collectives: {last} ({arrivals.held_us[last]:,.1f} us "
        f"in all, last at {arrivals.last[last]} of {arrivals.collectives})"
    )
    if slow.rank is None:  # on a small model the extra batch is too little work to stand out
        return not_applicable(
            name, f"{given}, too little work on this model to make it stand out ({slow.text}); {arrived}"
        )
    return Verdict(
        name,
        slow.rank == slow_rank and slow.reason == "computing" and last == slow_rank,
        f"{given}; the view names rank {slow.rank} ({slow.reason}); {arrived}",
    )
