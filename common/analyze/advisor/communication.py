"""The communication rules of one rank: byte alignment, small packets, bandwidth contention.

As msprof-analyze's advisor judges them (``advisor/analyzer/communication/``; thresholds in
``rules/en/byte_alignment.yaml``, ``packet.yaml``, ``bandwidth_contention.yaml``). Packets are
counted per op of communication.json; the advisor also counts that file's per-step ``Total Op Info``
summaries as ops, so its counts and ratio differ by those lines: both are given.
"""

from __future__ import annotations

import bisect
from collections import defaultdict

from common.analyze.advisor import Finding, clear, found, not_run
from common.formats.intervals import merge

ADVISOR = "msprof-analyze advisor communication/"
ALIGN_BYTES = 512  # byte_alignment.yaml min_size; checker _BASE_SIZE
SMALL_MB = {"SDMA": 16.0, "RDMA": 1.0}  # packet.yaml min_sdma_size, min_rdma_size
SMALL_SHARE = 0.2  # packet.yaml min_sdma_ratio, min_rdma_ratio
CONTENTION_GBS = 0.8 * 18  # bandwidth_contention.yaml threshold x sdma_baseline
NO_COMMUNICATION = (
    "no communication analysis (communication.json or analysis.db; torch_npu writes it for a distributed run)"
)


def byte_alignment(rank) -> Finding:
    rule = "Byte Alignment Analysis"
    threshold = (
        f"an SDMA task off the chip, over {ALIGN_BYTES} bytes, whose size is not a multiple of {ALIGN_BYTES} "
        f"({ADVISOR}alignment/byte_alignment_checker.py, rules/en/byte_alignment.yaml)"
    )
    tasks = rank.timeline.hccl_tasks if rank.timeline else None
    if tasks is None:
        return not_run(
            rule,
            "no HCCL task level in the timeline (trace_view.json's HCCL process, or the database's "
            "COMMUNICATION_TASK_INFO; torch_npu Level1 or above)",
            threshold,
        )
    per: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for t in tasks:
        if t.transport == "SDMA" and t.link != "ON_CHIP" and (t.size_bytes or 0) > ALIGN_BYTES:
            op = per[t.op_name]
            op[0] += t.size_bytes
            op[1] += t.dur_us
            if t.size_bytes % ALIGN_BYTES:
                op[2] += t.dur_us
                op[3] += 1
    rows = [
        [name, int(size), round(dur, 4), round(bad, 4), round(size * 1e-9 / (dur * 1e-6), 4) if dur else 0.0]
        for name, (size, dur, bad, n) in per.items()
        if n
    ]
    if not rows:
        return clear(
            rule, f"{len(per)} op(s) moved SDMA data off the chip, all in {ALIGN_BYTES}-byte multiples", threshold
        )
    rows.sort(key=lambda r: -r[3])
    return found(
        rule,
        f"{len(rows)} communication op(s) move data in sizes that are not {ALIGN_BYTES}-byte multiples: "
        + ", ".join(f"{r[0]} ({r[1]:,} bytes)" for r in rows[:5]),
        threshold,
        remedy="pad the communicated tensors (bucket sizes) to multiples of 512 bytes",
        figures={"ops": {r[0]: r[1] for r in rows}},
        header=["Op", "Total size(Byte)", "Duration(us)", "Misaligned duration(us)", "Bandwidth(GB/s)"],
        rows=rows,
    )


def _packets(ops, link: str) -> tuple[int, int, float, int, int]:
    """(ops moving data on the link, of them small, their transit ms, and the advisor's two extra counts)."""
    count = small = 0
    ms = 0.0
    kinds: dict[tuple[str, str], float] = defaultdict(float)
    for op in ops:
        size = next((x for x in op.links if x.link == link), None)
        if size is None:
            continue
        count += 1
        kinds[(op.step, op.kind)] += size.size_mb
        if size.size_mb < SMALL_MB[link]:
            small += 1
            ms += size.time_ms
    return count, small, ms, len(kinds), sum(1 for mb in kinds.values() if mb < SMALL_MB[link])


def packets(rank) -> Finding:
    rule = "Packet Analysis"
    threshold = (
        f"more than {SMALL_SHARE:.0%} of the ops that move data move less than 16 MB over SDMA or 1 MB over "
        f"RDMA ({ADVISOR}packet/packet_checker.py, rules/en/packet.yaml)"
    )
    if rank.communication is None:
        return not_run(rule, NO_COMMUNICATION, threshold)
    rows, figures = [], {}
    for link in SMALL_MB:
        count, small, ms, extra, extra_small = _packets(rank.communication, link)
        if count and small / count > SMALL_SHARE:
            rows.append(
                [link, count, small, f"{small / count:.2%}", round(ms, 5), f"{small + extra_small} of {count + extra}"]
            )
            figures[link] = {
                "count": count,
                "small": small,
                "small_ms": round(ms, 5),
                "advisor_count": count + extra,
                "advisor_small": small + extra_small,
            }
    if not rows:
        return clear(rule, "small transfers are a minor part of the communication", threshold)
    text = "; ".join(
        f"{r[0]}: {r[2]} of {r[1]} ops ({r[3]}) move less than {SMALL_MB[r[0]]:g} MB, {r[4]:g} ms "
        f"(msprof-analyze counts the Total Op Info lines too: {r[5]})"
        for r in rows
    )
    return found(
        rule,
        text + ". Many small transfers cost a launch each",
        threshold,
        fix="accumulate",
        remedy="a larger batch or gradient accumulation (fewer, larger all-reduces); bigger DDP buckets",
        figures=figures,
        header=["Link", "Ops", "Small", "Share", "Small time(ms)", "msprof-analyze counts"],
        rows=rows,
    )


def bandwidth_contention(rank) -> Finding:
    rule = "Bandwidth Contention Analysis"
    threshold = (
        f"an SDMA op under {CONTENTION_GBS:.1f} GB/s while a MatMul kernel runs "
        f"({ADVISOR}contention/, rules/en/bandwidth_contention.yaml: 0.8 x 18 GB/s)"
    )
    if rank.communication is None:
        return not_run(rule, NO_COMMUNICATION, threshold)
    if not rank.tasks:
        return not_run(rule, "no task table (kernel_details.csv or a profiler database) to find MatMuls in", threshold)
    # the MatMuls' busy spans, merged: disjoint and in order, so the last span starting before an op ends is the
    # only one that can overlap it
    matmuls = merge([(t.start_us, t.end_us) for t in rank.tasks if "matmul" in t.op_name.lower()])
    if not matmuls:
        return not_run(rule, "no MatMul kernel in the task table to overlap with", threshold)
    starts = [s for s, _ in matmuls]
    slow = []
    for op in rank.communication:
        sdma = next((x for x in op.links if x.link == "SDMA"), None)
        if sdma is None or op.start_us is None:
            continue
        i = bisect.bisect_left(starts, op.start_us + op.elapse_ms * 1e3)
        if i and matmuls[i - 1][1] > op.start_us and sdma.bandwidth_gbs < CONTENTION_GBS:
            slow.append([op.op_name, round(op.elapse_ms, 4), round(sdma.bandwidth_gbs, 2)])
    if not slow:
        return clear(rule, "no SDMA op slowed while MatMuls ran", threshold)
    return found(
        rule,
        f"{len(slow)} SDMA op(s) under {CONTENTION_GBS:.1f} GB/s while MatMuls ran",
        threshold,
        remedy="compare with computation/communication overlap off: keep it only if it still pays",
        figures={"ops": len(slow)},
        header=["Op", "Duration(ms)", "Bandwidth(GB/s)"],
        rows=sorted(slow, key=lambda r: r[2])[:10],
    )


RULES = (byte_alignment, packets, bandwidth_contention)
