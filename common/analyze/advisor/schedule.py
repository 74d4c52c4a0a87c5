"""The timeline rules: replaceable APIs, host syncs, operator compiles, memory calls, GC, the data
loader, SyncBatchNorm and the AI Core's frequency.

Each follows its msprof-analyze advisor checker (``advisor/analyzer/schedule/*``, ``memory/``,
``dataloader/``, ``computation/ai_core_freq/``; thresholds from ``rules/en/*.yaml``). They read the
timeline's framework and CANN events (:class:`common.formats.advice_input.Timeline`) over the whole
capture: the advisor keeps the last profiled step for some of them, so on a capture of many steps
its counts can be smaller.
"""

from __future__ import annotations

import re
from collections import defaultdict

from common.analyze.advisor import Finding, clear, found, not_run

ADVISOR = "msprof-analyze advisor"
NO_TIMELINE = "no timeline (trace_view.json, or a torch_npu database's PYTORCH_API / CANN_API tables)"
# Replaceable APIs (rules/timeline_fusion_ops.yaml, CANN 8.0.0 with torch 2.1): each pattern is a sequence of
# first-level torch ops; "op?" may be absent, "op*2" may repeat up to twice.
AFFINITY = {
    "torch_npu.fast_gelu": ["gelu"],
    "torch_npu.npu_confusion_transpose": [
        f"{a} contiguous? {b}"
        for a, b in (
            ("permute", "reshape"),
            ("permute", "view"),
            ("transpose", "reshape"),
            ("transpose", "view"),
            ("reshape", "permute"),
            ("reshape", "transpose"),
            ("view", "permute"),
            ("view", "transpose"),
        )
    ],
    "torch_npu.npu_scaled_masked_softmax": ["softmax mul? masked_fill_", "softmax mul? add"],
    "optimizer.clip_grad_norm_fused_": ["add reciprocal mul"],
    "torch_npu.npu_fusion_attention": [
        "matmul add? mul? masked_fill_? softmax dropout? matmul",
        "matmul add? mul? add? softmax dropout? matmul",
    ],
    "torch_npu.npu_rotary_mul": ["chunk neg cat mul*2 add", "slice neg cat mul*2 add"],
    "torch_npu.npu_rms_norm": ["pow? mean? add? rsqrt mul type_as?"],
    "torch_npu.npu_swiglu": [
        f"{s} {rest}"
        for s in ("slice", "chunk")
        for rest in ("silu mul", "mul silu", "sigmoid mul mul", "mul sigmoid mul", "mul mul sigmoid")
    ],
    "torch_npu.npu_geglu": [f"{s} {rest}" for s in ("slice", "chunk") for rest in ("gelu mul", "mul gelu")],
    "torch_npu.npu_group_norm_silu": ["group_norm silu"],
    "torch.addmm": ["mul mul add"],
    "torch_npu.npu_add_layer_norm": ["add layer_norm"],
}
FUSED_OPTIMIZERS = ("AdamW", "SGD", "Adadelta", "Lamb", "AdamP", "BertAdam", "RMSprop", "RMSpropTF", "Adam")
SYNC_STREAM, NODE_LAUNCH = "AscendCL@aclrtSynchronizeStream", "Node@launch"
SYNC_RATIO = 0.5  # rules/en/synchronize.yaml min_co_occurrence_ratio
OP_COMPILE, MAX_COMPILES = "AscendCL@aclopCompileAndExecute", 20  # Constant.MAX_OP_COMPILE_NUM
MEMORY_CALLS = ("AscendCL@aclMallocMemInner", "AscendCL@aclrtFreePhysical", "AscendCL@aclrtFree")
MEMORY_MAX_US = 10_000  # rules/en/memory.yaml max_total_duration
GC_MIN_US = 1_000  # rules/en/gc.yaml gc_threshold
FREE_GC_US, ACL_TIME_RATIO, ACL_COUNT_RATIO = 200_000, 0.01, 0.0001  # rules/en/conjectured_gc.yaml
DATALOADER_MAX_US = 10_000  # rules/en/dataloader.yaml dataloader_duration_threshold
MAX_SYNCBN = 20  # rules/en/sync_batchnorm.yaml max_syncbn_num
FREQ_DROP = 0.05  # config/config.ini frequency_threshold


def _pattern(text: str) -> re.Pattern:
    parts = []
    for token in text.split():
        name, _, most = token.partition("*")
        name = name.rstrip("?")
        low, high = (0, int(most)) if most else (0, 1) if token.endswith("?") else (1, 1)
        parts.append(f"(?:-{re.escape(name)}-){{{low},{high}}}")
    return re.compile("".join(parts))


def _first_level(events) -> list:
    """The aten ops not inside the previous kept one, by start: the ops the model's code called."""
    kept = []
    for e in sorted((e for e in events if e.name.startswith("aten::")), key=lambda e: e.start_us):
        if kept and e.start_us + e.dur_us <= kept[-1].start_us + kept[-1].dur_us and e.start_us >= kept[-1].start_us:
            continue
        kept.append(e)
    return kept


def affinity_api(rank) -> Finding:
    rule = "Affinity API Issues"
    threshold = (
        f"first-level torch op sequences and Optimizer.step#<name>.step events that have an NPU-fused API "
        f"({ADVISOR} schedule/fusion_ops, rules/timeline_fusion_ops.yaml, CANN 8.0.0 / torch 2.1 rules)"
    )
    if rank.timeline is None:
        return not_run(rule, NO_TIMELINE, threshold)
    ops = "".join(f"-{e.name[len('aten::') :]}-" for e in _first_level(rank.timeline.framework))
    hits: dict[str, int] = {}
    for api, patterns in AFFINITY.items():
        count = sum(len(_pattern(p).findall(ops)) for p in patterns)
        if count:
            hits[api] = count
    for e in rank.timeline.framework:
        m = re.match(r"Optimizer\.step#(\w+)\.step$", e.name)
        if m and m[1] in FUSED_OPTIMIZERS:
            api = f"torch_npu.optim.NpuFused{m[1]}"
            hits[api] = hits.get(api, 0) + 1
    if not hits:
        return clear(rule, "no op sequence or optimizer with an NPU-fused replacement", threshold)
    rows = [[api, n] for api, n in sorted(hits.items(), key=lambda kv: -kv[1])]
    fix = "fused-optimizer" if any("optim" in api for api in hits) else None
    return found(
        rule,
        f"{len(hits)} API(s) to replace: " + ", ".join(f"{a} ({n}x)" for a, n in rows),
        threshold,
        remedy="use the NPU-fused API in the model code (the code stacks: profile with with_stack=True)",
        fix=fix,
        figures={"apis": sorted(hits)},
        header=["API to use", "Occurrences"],
        rows=rows,
    )


def synchronize_stream(rank) -> Finding:
    rule = "Synchronize Stream Issues"
    threshold = (
        f"SynchronizeStream right after a Node@launch in more than {SYNC_RATIO:.0%} of the launches "
        f"({ADVISOR} schedule/synchronize_stream, rules/en/synchronize.yaml)"
    )
    if rank.timeline is None or not rank.timeline.cann:
        return not_run(rule, "no CANN API events in the timeline (torch_npu Level1 or above records them)", threshold)
    events = sorted(
        (e for e in rank.timeline.cann if e.name.startswith((SYNC_STREAM, NODE_LAUNCH))), key=lambda e: e.start_us
    )
    launches = sum(1 for e in events if e.name.startswith(NODE_LAUNCH))
    syncs = sum(1 for e in events if e.name.startswith(SYNC_STREAM))
    after = sum(
        1 for a, b in zip(events, events[1:]) if a.name.startswith(NODE_LAUNCH) and b.name.startswith(SYNC_STREAM)
    )
    ratio = round(after / launches, 4) if launches else 0.0
    text = f"{syncs} SynchronizeStream, {launches} Node@launch, {after} right after a launch (ratio {ratio:g})"
    if ratio <= SYNC_RATIO:
        return clear(rule, text, threshold)
    return found(
        rule,
        text + ": every launch waits for the device",
        threshold,
        remedy="unset ASCEND_LAUNCH_BLOCKING; remove .item() / .cpu() / prints from the step",
        fix="batch",
        figures={"synchronize": syncs, "launches": launches, "ratio": ratio},
    )


def operator_dispatch(rank) -> Finding:
    rule = "Operator Dispatch Issues"
    threshold = f"{OP_COMPILE} called {MAX_COMPILES} times or more ({ADVISOR} schedule/dispatch, MAX_OP_COMPILE_NUM)"
    if rank.timeline is None or not rank.timeline.cann:
        return not_run(rule, "no CANN API events in the timeline (torch_npu Level1 or above records them)", threshold)
    compiles = [e for e in rank.timeline.cann if e.name == OP_COMPILE]
    spent = sum(e.dur_us for e in compiles)
    text = f"{len(compiles)} online operator compile(s), {spent:,.1f} us"
    if len(compiles) < MAX_COMPILES:
        return clear(rule, text, threshold)
    return found(
        rule,
        text,
        threshold,
        fix="binary-operators",
        remedy="torch_npu.npu.set_compile_mode(jit_compile=False); torch_npu.npu.config.allow_internal_format = False",
        figures={"count": len(compiles), "total_us": round(spent, 3)},
    )


def memory_operators(rank) -> Finding:
    rule = "Memory Operator Issues"
    threshold = (
        f"{', '.join(MEMORY_CALLS)}: one name >= {MEMORY_MAX_US:,} us in all ({ADVISOR} memory/, rules/en/memory.yaml)"
    )
    if rank.timeline is None or not rank.timeline.cann:
        return not_run(rule, "no CANN API events in the timeline (torch_npu Level1 or above records them)", threshold)
    per: dict[str, list[float]] = defaultdict(list)
    for e in rank.timeline.cann:
        if e.name in MEMORY_CALLS:
            per[e.name].append(e.dur_us)
    rows = [[name, len(d), round(sum(d), 3)] for name, d in per.items() if sum(d) >= MEMORY_MAX_US]
    if not rows:
        return clear(
            rule, f"{sum(len(d) for d in per.values())} memory call(s), none {MEMORY_MAX_US:,} us in all", threshold
        )
    return found(
        rule,
        "; ".join(f"{n} x{c}, {t:,.1f} us" for n, c, t in rows),
        threshold,
        remedy="export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True; no torch.npu.empty_cache() in the step",
        figures={r[0]: {"count": r[1], "total_us": r[2]} for r in rows},
        header=["Call", "Count", "Total(us)"],
        rows=rows,
    )


def gc(rank) -> Finding:
    rule = "GC Analysis"
    threshold = f"a Python GC pass >= {GC_MIN_US:,} us ({ADVISOR} schedule/gc, rules/en/gc.yaml)"
    if rank.timeline is None:
        return not_run(rule, NO_TIMELINE, threshold)
    if not rank.timeline.gc:
        return not_run(
            rule,
            "the timeline has no GC events (torch_npu records them with experimental_config gc_detect_threshold)",
            threshold,
        )
    slow = sorted((e for e in rank.timeline.gc if e.dur_us >= GC_MIN_US), key=lambda e: -e.dur_us)
    if not slow:
        return clear(rule, f"{len(rank.timeline.gc)} GC pass(es), none of {GC_MIN_US:,} us", threshold)
    spent = sum(e.dur_us for e in slow)
    return found(
        rule,
        f"{len(slow)} GC pass(es) of {GC_MIN_US:,} us or more, {spent / 1e3:,.3f} ms in all",
        threshold,
        remedy="gc.freeze() after start-up, gc.set_threshold() higher, or gc.disable() with gc.collect() between steps",
        figures={"count": len(slow), "total_ms": round(spent / 1e3, 4)},
        header=["Start(us)", "Duration(us)"],
        rows=[[e.start_us, round(e.dur_us, 3)] for e in slow[:10]],
    )


def conjectured_gc(rank) -> Finding:
    rule = "Conjectured Gc"
    threshold = (
        f"a Free span > {FREE_GC_US:,} us with host API time < {ACL_TIME_RATIO:g} and calls < {ACL_COUNT_RATIO:g} "
        f"per us of it ({ADVISOR} schedule/conjectured_gc, rules/en/conjectured_gc.yaml)"
    )
    line = rank.timeline
    if line is None or not line.free or not line.cann:
        return not_run(rule, "needs the timeline's Free spans (Overlap Analysis) and CANN API events", threshold)
    if line.gc:
        return clear(rule, "the timeline records GC itself (see GC Analysis)", threshold)
    acl = [e for e in line.cann if e.name.startswith("AscendCL@")]
    quiet = []
    for free in (f for f in line.free if f.dur_us > FREE_GC_US):
        inside = [e for e in acl if e.start_us < free.start_us + free.dur_us and e.start_us + e.dur_us > free.start_us]
        if sum(e.dur_us for e in inside) / free.dur_us < ACL_TIME_RATIO and len(inside) / free.dur_us < ACL_COUNT_RATIO:
            quiet.append(free)
    if not quiet:
        return clear(rule, f"no Free span over {FREE_GC_US:,} us without host work", threshold)
    spent = sum(f.dur_us for f in quiet)
    return found(
        rule,
        f"{len(quiet)} Free span(s), {spent:,.1f} us, with almost no host API calls: likely Python GC",
        threshold,
        remedy="profile with gc_detect_threshold to confirm; gc.freeze() / gc.disable() as for GC",
        figures={"count": len(quiet), "total_us": round(spent, 3)},
    )


def dataloader(rank) -> Finding:
    rule = "Slow Dataloader Issues"
    threshold = f"a DataLoader __next__ >= {DATALOADER_MAX_US:,} us ({ADVISOR} dataloader/, rules/en/dataloader.yaml)"
    if rank.timeline is None:
        return not_run(rule, NO_TIMELINE, threshold)
    loads = [e for e in rank.timeline.framework if "dataloader" in e.name.lower()]
    slow = [e for e in loads if e.dur_us >= DATALOADER_MAX_US]
    if not slow:
        return clear(rule, f"{len(loads)} data loader call(s), none of {DATALOADER_MAX_US:,} us", threshold)
    first = min(slow, key=lambda e: e.start_us)
    return found(
        rule,
        f"{len(slow)} slow data loader call(s); the first {first.dur_us:,.1f} us",
        threshold,
        remedy="num_workers > 0 and pin_memory=True; data on a local disk, not in tar/zip",
        figures={"count": len(slow), "first_us": round(first.dur_us, 3)},
    )


def sync_batchnorm(rank) -> Finding:
    rule = "SyncBatchNorm Issues"
    threshold = f"{MAX_SYNCBN} or more SyncBatchNorm calls ({ADVISOR} schedule/syncbn, rules/en/sync_batchnorm.yaml)"
    if rank.timeline is None:
        return not_run(rule, NO_TIMELINE, threshold)
    count = sum(1 for e in rank.timeline.framework if e.name.lower() == "syncbatchnorm")
    if count < MAX_SYNCBN:
        return clear(rule, f"{count} SyncBatchNorm call(s)", threshold)
    return found(
        rule,
        f"{count} SyncBatchNorm calls: each one a collective",
        threshold,
        remedy="BatchNorm instead of SyncBatchNorm where the batch per device allows",
        figures={"count": count},
    )


def ai_core_frequency(rank) -> Finding:
    rule = "AI Core Frequency Issues"
    threshold = f"an op that ran {FREQ_DROP:.0%} or more below the nominal AI Core frequency ({ADVISOR} computation/ai_core_freq)"
    nominal = (rank.device_info or {}).get("aic_frequency")
    if not nominal:
        return not_run(rule, "no nominal frequency (msprof's info.json, aic_frequency)", threshold)
    samples = sorted(rank.timeline.freq_mhz) if rank.timeline else []
    if not samples:
        return not_run(rule, "no AI Core Freq samples in the timeline", threshold)
    nominal = float(nominal)
    per: dict[str, list[float]] = defaultdict(list)
    for t in rank.tasks or []:
        if t.task_type in ("AI_CORE", "MIX_AIC"):
            during = [mhz for ts, mhz in samples if ts <= t.end_us] or [samples[0][1]]
            per[t.op_name].append(min(during[-2:]))
    rows = [[name, len(f), round(sum(nominal - x for x in f) / (nominal * len(f)), 4)] for name, f in per.items()]
    rows = sorted((r for r in rows if r[2] >= FREQ_DROP), key=lambda r: -r[2])
    if not rows:
        return clear(rule, f"no op ran {FREQ_DROP:.0%} below {nominal:g} MHz", threshold)
    return found(
        rule,
        f"{len(rows)} op(s) ran below the nominal {nominal:g} MHz",
        threshold,
        remedy="check the machine's temperature and power cap (npu-smi info)",
        figures={"ops": len(rows)},
        header=["Op", "Tasks", "Drop ratio"],
        rows=rows[:10],
    )


RULES = (
    affinity_api,
    synchronize_stream,
    operator_dispatch,
    memory_operators,
    gc,
    conjectured_gc,
    dataloader,
    sync_batchnorm,
    ai_core_frequency,
)
