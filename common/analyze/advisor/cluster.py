"""The rules across ranks: slow rank, slow link, RDMA retransmission; and the step summary of one.

As msprof-analyze's advisor judges them (``advisor/analyzer/cluster/slow_rank_analyzer.py``,
``slow_link_analyzer.py``, ``communication/retransmission/``, ``overall/overall_summary_analyzer.py``):
the slow-rank rule pools every (step, rank) row and calls a part uneven when its max minus its min
exceeds 5% of the mean step; the slow-link rule sums each rank's SDMA and RDMA transit size and time.
"""

from __future__ import annotations

from statistics import mean

from common.analyze.advisor import Finding, clear, found, not_run

ADVISOR = "msprof-analyze advisor"
SPREAD = 0.05  # slow_rank_analyzer.py / slow_link_analyzer.py RATIO_THRESHOLD
RETRANSMIT_MS = 4000  # rules/en/rdma_analysis.yaml min_retransmission_time
PARTS = (("Computing", "computing_us"), ("Communication", "communication_not_overlapped_us"), ("Free", "free_us"))


def slow_rank(ranks) -> Finding:
    rule = "slow rank"
    threshold = (
        f"Computing, Communication (Not Overlapped) or Free: max - min over every (step, rank) > "
        f"{SPREAD:.0%} of the mean step ({ADVISOR} cluster/slow_rank_analyzer.py)"
    )
    rows = [(r.rank, s) for r in ranks for s in r.steps]
    if len(ranks) < 2 or not rows:
        return not_run(
            rule, "needs a step table (step_trace_time.csv or the database's) on two ranks or more", threshold
        )
    total = mean(s.computing_us + s.communication_not_overlapped_us + s.free_us for _, s in rows)
    uneven = {}
    for name, field in PARTS:
        values = [getattr(s, field) for _, s in rows]
        if total and (max(values) - min(values)) / total > SPREAD:
            worst = max(rows, key=lambda rs: getattr(rs[1], field))
            uneven[name] = {"difference_ms": round((max(values) - min(values)) / 1e3, 3), "max_rank": worst[0]}
    table = [
        [s.step, r, round(s.computing_us, 3), round(s.communication_not_overlapped_us, 3), round(s.free_us, 3)]
        for r, s in rows
    ]
    if not uneven:
        return clear(
            rule, f"the ranks' Computing, Communication and Free differ by {SPREAD:.0%} of the step or less", threshold
        )
    text = "; ".join(
        f"{name} differs by {v['difference_ms']:g} ms between ranks (most on rank {v['max_rank']})"
        for name, v in uneven.items()
    )
    fix = "rebalance" if "Computing" in uneven else "accumulate" if "Communication" in uneven else None
    return found(
        rule,
        text + ". The others wait for the slowest in every collective",
        threshold,
        fix=fix,
        remedy="even the work per rank (data, pipeline stages); python -m common cluster names the rank",
        figures=uneven,
        header=["Step", "Rank", "Computing(us)", "Communication(us)", "Free(us)"],
        rows=table,
    )


def slow_link(ranks) -> Finding:
    rule = "slow link"
    threshold = f"each rank's SDMA and RDMA bandwidth (summed transit size / time); uneven beyond {SPREAD:.0%} of the mean ({ADVISOR} cluster/slow_link_analyzer.py)"
    per = [r for r in ranks if r.communication is not None]
    if len(ranks) < 2 or not per:
        return not_run(
            rule,
            "needs each rank's communication analysis (communication.json or analysis.db) on two ranks or more",
            threshold,
        )
    figures, rows, uneven = {}, [], []
    for link in ("RDMA", "SDMA"):
        bw = []
        for r in per:
            moved = [x for op in r.communication for x in op.links if x.link == link]
            size, ms = sum(x.size_mb for x in moved), sum(x.time_ms for x in moved)
            bw.append(round(size / ms, 4) if ms else 0.0)
            rows.append([r.rank, link, round(size, 3), round(ms, 4), bw[-1]])
        avg = mean(bw)
        figures[link] = {"average": round(avg, 3), "max": max(bw), "min": min(bw)}
        if avg and (max(bw) - min(bw)) / avg >= SPREAD:
            uneven.append(link)
    text = "; ".join(
        f"{k} {v['average']:g} GB/s on average (max {v['max']:g}, min {v['min']:g})" for k, v in figures.items()
    )
    if not uneven:
        return clear(rule, text, threshold, figures)
    return found(
        rule,
        f"{text}: {', '.join(uneven)} uneven across ranks",
        threshold,
        figures=figures,
        remedy="check the slow rank's links (hccn_tool, the switch ports); python -m common cluster lists them",
        header=["Rank", "Link", "Size(MB)", "Time(ms)", "Bandwidth(GB/s)"],
        rows=rows,
    )


def retransmission(ranks) -> Finding:
    rule = "Communication Retransmission Analysis"
    threshold = (
        f"an op taking >= {RETRANSMIT_MS} ms on every rank with an RDMA transfer > {RETRANSMIT_MS} ms "
        f"({ADVISOR} communication/retransmission, rules/en/rdma_analysis.yaml)"
    )
    per = [r for r in ranks if r.communication is not None]
    if len(per) < 2:
        return not_run(rule, "needs each rank's communication analysis on two ranks or more", threshold)
    ops: dict[tuple, list] = {}
    for r in per:
        for op in r.communication:
            ops.setdefault(op.key, []).append((r.rank, op))
    hits = []
    for (step, name, group), seen in ops.items():
        if min(op.elapse_ms for _, op in seen) < RETRANSMIT_MS:
            continue
        for rank, op in seen:
            rdma = next((x for x in op.links if x.link == "RDMA"), None)
            if rdma and rdma.time_ms > RETRANSMIT_MS:
                hits.append([group, name, step, rank, rdma.size_mb, rdma.time_ms])
    if not hits:
        return clear(rule, f"no op took {RETRANSMIT_MS} ms on every rank with a slow RDMA transfer", threshold)
    return found(
        rule,
        f"{len(hits)} RDMA transfer(s) over {RETRANSMIT_MS / 1e3:g} s in {len({h[0] for h in hits})} "
        "group(s): a retransmission",
        threshold,
        remedy="check the RDMA network configuration and ports",
        figures={"groups": len({h[0] for h in hits})},
        header=["Group", "Op", "Step", "Rank", "RDMA size(MB)", "RDMA time(ms)"],
        rows=hits[:10],
    )


def overall(rank) -> Finding:
    rule = "Overall Summary"
    threshold = f"the step table's parts ({ADVISOR} overall/overall_summary_analyzer.py)"
    if not rank.steps:
        return not_run(
            rule, "no step table (step_trace_time.csv, trace_view.json's Overlap Analysis or the database's)", threshold
        )
    parts = {name: sum(getattr(s, field) for s in rank.steps) / 1e3 for name, field in PARTS}
    e2e = sum(parts.values())
    text = f"{e2e:,.3f} ms in {len(rank.steps)} step(s): " + ", ".join(
        f"{name} {ms:,.3f} ms ({ms / e2e:.1%})" if e2e else f"{name} {ms:,.3f} ms" for name, ms in parts.items()
    )
    text += " (the step's parts, judged by no threshold here: python -m common report names what bounds the step)"
    return clear(rule, text, threshold, {name: round(ms, 3) for name, ms in parts.items()})


def graph_fusion(ranks) -> Finding:
    return not_run(
        "Fusion Issues",
        "needs a GE graph dump (a file ending Build.txt, $ATT_ADVISOR_GRAPH_FILE): PyTorch "
        "profiling writes none; 03's ONNX graph is read by its own mode",
        f"graph fusion passes that did not apply ({ADVISOR} graph_fusion/, rules/op_fusion_pass.yaml)",
    )


def comparison(ranks) -> Finding:
    return not_run(
        "Kernel / API compare",
        "needs a second capture: python -m common compare BASELINE THIS (per op, "
        "family and step, each rank's too; --json)",
        f"op types and torch APIs against a baseline or between ranks ({ADVISOR} comparison/)",
    )
