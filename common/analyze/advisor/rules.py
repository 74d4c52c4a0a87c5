"""Every advisor rule over a capture's ranks, in the order msprof-analyze's problems sheet lists them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from common.analyze.advisor import (
    Finding,
    aicore,
    cluster,
    communication,
    environment,
    merge_ranks,
    operators,
    schedule,
)

RANK_RULES = (
    environment.environment,
    cluster.overall,
    *communication.RULES,
    *aicore.RULES,
    operators.ai_cpu,
    operators.dynamic_shape,
    operators.block_dim,
    operators.no_bound,
    operators.fusible_operators,
    *schedule.RULES,
    operators.launch_bound,
    operators.conversions,
)
CLUSTER_RULES = (cluster.slow_rank, cluster.slow_link, cluster.retransmission)
CAPTURE_RULES = (cluster.graph_fusion, cluster.comparison)  # what needs more than the capture holds


def advise(ranks: Iterable) -> list[Finding]:
    """The findings of every rule: the rules of one rank on each rank (merged per rule), then those across ranks.

    ``ranks`` may be an iterator: each rank's tasks and timeline are let go once its rules have run; the rules
    across ranks keep only the step tables and the communication analyses."""
    per_rule: list[list] = [[] for _ in RANK_RULES]
    kept = []
    for rank in ranks:
        for found, rule in zip(per_rule, RANK_RULES):
            found.append((rank.rank, rule(rank)))
        kept.append(dataclasses.replace(rank, tasks=[], timeline=None))
    findings = [merge_ranks(found) for found in per_rule]
    return findings[:2] + [rule(kept) for rule in CLUSTER_RULES] + findings[2:] + [rule(kept) for rule in CAPTURE_RULES]
