"""Every advisor rule over a capture's ranks, in the order msprof-analyze's problems sheet lists them."""

from __future__ import annotations

from common.analyze.advisor import Finding, aicore, cluster, communication, environment, merge_ranks, operators, schedule

RANK_RULES = (environment.environment, cluster.overall, *communication.RULES, *aicore.RULES, operators.ai_cpu,
              operators.dynamic_shape, operators.block_dim, operators.no_bound, *schedule.RULES,
              operators.launch_bound, operators.conversions)
CLUSTER_RULES = (cluster.slow_rank, cluster.slow_link, cluster.retransmission)


def advise(ranks: list) -> list[Finding]:
    """The findings of every rule: the rules of one rank on each rank (merged per rule), then those across ranks."""
    findings = [merge_ranks([(r.rank, rule(r)) for r in ranks]) for rule in RANK_RULES]
    return findings[:2] + [rule(ranks) for rule in CLUSTER_RULES] + findings[2:]
