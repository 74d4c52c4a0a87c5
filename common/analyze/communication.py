"""Which collective, and is its time waiting or moving data: torch_npu's communication analysis per op.

Each rank's ``communication.json`` (or ``analysis.db``) splits every collective and point-to-point
op into the parts CANN's communication analysis defines (CANN 8.0.RC3 "msprof communication
analysis", hiascend.com ``atlasprofiling_16_0027``; MindStudio Insight's Communication view):

- Elapse: the whole op on the device;
- Transit: time moving data over a link; per link type, the size and the bandwidth (size / link time);
- Wait: time in notify-waits for the peer; Synchronization: the part of it before the first
  transfer (the ranks meeting: a late peer shows here);
- Idle = Elapse - Transit - Wait: inside the op but neither moving data nor waiting for a peer
  (CANN calls it the op's dispatch time);
- Wait ratio = Wait / (Wait + Transit); Synchronization ratio = Sync / (Sync + Transit).
  MindStudio's guidance: a ratio above 0.2 means the rank waits for another (``WAIT_RATIO_HIGH``).

The step verdict adds these over the ops, per rank, and names the largest part: waiting (the
late peer and by how much, from the ops' start times), moving data (the link and its bandwidth
against a nominal figure) or idle.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from common.formats.cluster_communication import Communication, OpTotals, Split

# MindStudio Insight's Communication Duration Analysis guidance checks "whether a rank's wait
# ratio is above the threshold (0.2)" (MindStudio user guide, Communication Analysis page).
WAIT_RATIO_HIGH = 0.2
# Nominal bandwidth per link type (GB/s) to judge a transfer against. SDMA/HCCS 18 GB/s is the
# baseline msprof-analyze's advisor uses for SDMA bandwidth (advisor/rules/bandwidth_contention.yaml,
# ``sdma_baseline: 18``; it flags transfers under 0.8 of it). RDMA 12.5 and PCIE 20 GB/s are the link
# bandwidths of msAdvisor's HCCL analysis model (Ascend/msadvisor training/hccl_analysis_model/utils/
# constant.py ``LINK_BANDWIDTH = {"HCCS": 18, "PCIE": 20, "RDMA": 12.5}``, with the same 0.8 threshold,
# ``BANDWIDTH_THRESHOLD``). No figure is cited for SIO: its bandwidth is reported, not judged.
NOMINAL_GBS = {"HCCS": 18.0, "SDMA": 18.0, "PCIE": 20.0, "RDMA": 12.5}
NOMINAL_SOURCE = (
    "HCCS/SDMA: msprof-analyze advisor's SDMA baseline (rules/bandwidth_contention.yaml); PCIE, RDMA: "
    "msAdvisor's HCCL analysis model (utils/constant.py LINK_BANDWIDTH)"
)
BANDWIDTH_LOW = 0.8  # of the nominal figure: msprof-analyze's bandwidth_contention threshold, msAdvisor's too
# Links reported per op: SDMA is the copy engine that carries HCCS and PCIE transfers (its numbers
# repeat theirs), LOCAL a copy within the device: shown only when no other link moved data.
LINK_ORDER = ("HCCS", "RDMA", "PCIE", "SIO", "SDMA", "LOCAL")


@dataclass(frozen=True)
class LinkUse:
    """What one link type carried over every op of a rank."""

    link: str
    size_mb: float
    time_ms: float

    @property
    def bandwidth_gbs(self) -> float:
        return self.size_mb / self.time_ms if self.time_ms else 0.0  # MB/ms = GB/s, as msprof computes it

    @property
    def nominal_gbs(self) -> float | None:
        return NOMINAL_GBS.get(self.link)


@dataclass(frozen=True)
class CommVerdict:
    kind: str  # "waiting" | "moving data" | "idle" | "none"
    text: str
    late_rank: int | None = None
    late_by_us: float = 0.0


def link_uses(sums: dict[str, list[float]]) -> list[LinkUse]:
    """Per link type, the size and link time added over some ops (link -> [size MB, time ms]), in LINK_ORDER."""
    order = {name: i for i, name in enumerate(LINK_ORDER)}
    return [LinkUse(k, *sums[k]) for k in sorted(sums, key=lambda k: (order.get(k, 99), k))]


def rank_links(split: Split) -> list[LinkUse]:
    """What each link carried over one rank's ops."""
    return link_uses({link: [size, time_ms] for link, size, time_ms in split.links})


def main_links(links: list[LinkUse]) -> list[LinkUse]:
    """The links that carried data between devices (SDMA and LOCAL only when nothing else did)."""
    named = [u for u in links if u.link not in ("SDMA", "LOCAL")]
    return named or [u for u in links if u.link == "SDMA"] or links


def bandwidth_text(use: LinkUse) -> str:
    nominal = use.nominal_gbs
    if nominal is None:
        return f"{use.link} {use.bandwidth_gbs:.2f} GB/s (no nominal figure cited for {use.link})"
    return f"{use.link} {use.bandwidth_gbs:.2f} GB/s ({100 * use.bandwidth_gbs / nominal:.0f}% of {nominal:g} GB/s)"


def op_rows(ops: list[OpTotals], limit: int = 8) -> list[list[object]]:
    """The largest ops by mean elapse: name, kind, mean elapse / transit / wait / sync / idle (ms), wait ratio,
    size moved and bandwidth of its main link, the rank that started last and by how much (µs)."""
    rows = []
    for op in sorted(ops, key=lambda o: -o.mean("elapse_ms"))[:limit]:
        transit, wait = op.mean("transit_ms"), op.mean("wait_ms")
        links = main_links(link_uses(op.link_totals))
        link = links[0] if links else None
        late = op.late_rank
        rows.append(
            [
                op.op_name,
                op.kind,
                op.mean("elapse_ms"),
                transit,
                wait,
                op.mean("sync_ms"),
                op.mean("idle_ms"),
                round(wait / (wait + transit), 4) if wait + transit else 0.0,
                link.size_mb / op.ranks if link else 0.0,
                f"{link.link} {link.bandwidth_gbs:.2f}" if link else "-",
                "-" if late is None else f"rank {late} +{op.lateness_us:,.1f}",
            ]
        )
    return rows


OP_HEADER = [
    "Op",
    "Kind",
    "Elapse(ms)",
    "Transit(ms)",
    "Wait(ms)",
    "Sync(ms)",
    "Idle(ms)",
    "Wait ratio",
    "Size(MB)",
    "Link GB/s",
    "Started last (us)",
]


def late_peer(ops: list[OpTotals]) -> tuple[OpTotals | None, dict[int, float]]:
    """The op with the largest arrival gap, and per rank the time the others waited for it (µs, summed)."""
    caused: dict[int, float] = {}
    worst = None
    for op in ops:
        late = op.late_rank
        if late is None:
            continue
        caused[late] = caused.get(late, 0.0) + op.lateness_us
        if worst is None or op.lateness_us > worst.lateness_us:
            worst = op
    return worst, caused


def step_verdict(comm: Communication) -> CommVerdict:
    """Whether the ranks' communication time is waiting for a peer, moving data, or idle; with the evidence."""
    source = comm.source
    times = comm.splits.times()  # per rank, in columns
    used = times["ops"] > 0
    if not used.any():
        unread = source == "none"  # every rank's files failed to read: rank_communication's notes say why
        return CommVerdict(
            "none",
            "no rank's communication analysis could be read (the notes say why)"
            if unread
            else f"no collective or point-to-point op in {source}",
        )
    ops = comm.ops_in_order()

    def mean(name: str) -> float:  # over the ranks that ran an op
        return statistics.fmean(times[name][used].tolist())

    elapse = mean("elapse_ms")
    parts = {"moving data": mean("transit_ms"), "waiting": mean("wait_ms"), "idle": mean("idle_ms")}
    kind = max(parts, key=parts.get)
    share = {k: 100 * v / elapse if elapse else 0.0 for k, v in parts.items()}
    head = (
        f"{len(ops)} ops, {elapse:,.2f} ms per rank ({source}): transit {parts['moving data']:,.2f} ms "
        f"({share['moving data']:.1f}%), wait {parts['waiting']:,.2f} ms ({share['waiting']:.1f}%), "
        f"idle {parts['idle']:,.2f} ms ({share['idle']:.1f}%)"
    )
    worst, caused = late_peer(ops)
    late_text = ""
    if worst is not None and worst.lateness_us > 0:
        _, _, sync_ms, transit_ms = worst.first  # the first rank's op: it waited for the last one
        late_text = (
            f"rank {worst.late_rank} started {worst.op_name} {worst.lateness_us:,.1f} us after rank "
            f"{worst.first_rank}, which spent {1000 * sync_ms:,.1f} us of it synchronising "
            f"(sync ratio {sync_ms / (sync_ms + transit_ms):.2f})"
            if sync_ms + transit_ms
            else ""
        )
    longest = max(ops, key=lambda o: o.mean("elapse_ms"))
    where = (
        f"the longest op is {longest.op_name} ({longest.mean('elapse_ms'):,.2f} ms: transit "
        f"{longest.mean('transit_ms'):,.2f}, wait {longest.mean('wait_ms'):,.2f}, idle "
        f"{longest.mean('idle_ms'):,.2f} ms)"
    )
    links = main_links(link_uses(comm.link_totals))
    bw = "; ".join(bandwidth_text(u) for u in links) if links else "no link moved data"
    if kind == "waiting":
        late = worst.late_rank if worst else None
        text = (
            f"communication is waiting for a peer: {head}. "
            + (f"The late peer: {late_text}; " if late_text else "")
            + f"{where}. Speed up what rank {late} does before the collective, not the link"
            if late is not None
            else f"communication is waiting for a peer: {head}; {where}"
        )
        return CommVerdict(kind, text, late, worst.lateness_us if worst else 0.0)
    if kind == "moving data":
        slow = [u for u in links if u.nominal_gbs and u.bandwidth_gbs < BANDWIDTH_LOW * u.nominal_gbs]
        judged = (
            f"under {BANDWIDTH_LOW:.0%} of nominal: {', '.join(u.link for u in slow)} — a slow or shared link"
            if slow
            else "at the link's pace: send less (fewer or smaller collectives) or overlap it"
        )
        return CommVerdict(
            kind,
            f"communication is moving data (bandwidth-bound): {head}; {where}; links: {bw} "
            f"({judged}; nominal: {NOMINAL_SOURCE})",
        )
    return CommVerdict(
        kind,
        f"communication is neither moving data nor waiting on a notify: {head}; {where}. Idle is time inside "
        f"the op with no transfer or wait (CANN: the op's dispatch time) — not the link ({bw}). "
        + (f"Arrival: {late_text}. " if late_text else "")
        + "Look at what the ranks do on the host and device around the op (Free, launches) before tuning the link",
        worst.late_rank if worst else None,
        worst.lateness_us if worst else 0.0,
    )
