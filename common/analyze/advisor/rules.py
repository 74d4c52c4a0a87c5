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


class Advisor:
    """Every rule, fed one rank at a time: the rules of one rank run on each rank as it is added (merged per rule
    at the end), then those across ranks. A rank's tasks and timeline are let go once its rules have run; the
    rules across ranks keep only the step tables and the communication analyses. The caller reads each rank
    (:func:`common.formats.advice_input.iter_capture_inputs`) and adds it: nothing here reads a file."""

    def __init__(self) -> None:
        self.per_rule: list[list] = [[] for _ in RANK_RULES]
        self.kept: list = []

    def add(self, rank) -> None:
        for found, rule in zip(self.per_rule, RANK_RULES):
            found.append((rank.rank, rule(rank)))
        self.kept.append(dataclasses.replace(rank, tasks=[], timeline=None))

    def findings(self) -> list[Finding]:
        """What every rule found, in the order of msprof-analyze's problems sheet."""
        found = [merge_ranks(ranks) for ranks in self.per_rule]
        kept = self.kept
        return found[:2] + [rule(kept) for rule in CLUSTER_RULES] + found[2:] + [rule(kept) for rule in CAPTURE_RULES]


def advise(ranks: Iterable) -> list[Finding]:
    """:class:`Advisor` over ranks already read (a list): every rule's findings."""
    advisor = Advisor()
    for rank in ranks:
        advisor.add(rank)
    return advisor.findings()
