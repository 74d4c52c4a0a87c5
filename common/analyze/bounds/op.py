"""Per-op lower bounds, busiest pipes and the run-level hint: pure functions over parsed tasks and step tables.

Three questions, each answered with its evidence:

- per op: how fast *could* it be? A lower bound from the work in its shapes — FLOPs over peak
  compute, bytes over memory bandwidth, whichever is larger — and the fraction of that bound the
  measured time achieves; compute- or memory-bound by which term is larger (the roofline);
- per op with PMU data: which pipe was busy most of the time (cube/vector vs scalar vs MTE);
- per run: host-bound or device-bound from Computing:Free, with the change that fits.

Device peaks come from :data:`DEVICE_PEAKS` (NPU) or from a calibration on the measuring
machine (portable, see :mod:`common.collect.calibrate`); this module only receives them.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass

from common.analyze import work_models
from common.analyze.families import ELEMENTWISE_FAMILIES, NO_ARITHMETIC_FAMILIES, op_family
from common.analyze.bounds.step import HOST_BOUND_BELOW, StepSummary, batch_try, precision_try
from common.analyze.work_models import Work
from common.formats.records import Task, time_by_op_and_dtypes


@dataclass(frozen=True)
class Peaks:
    """What one device can do at most: FLOP/s (fp16 or fp32 matmul; other precisions where measured) and memory
    bytes/s."""

    name: str
    flops_per_s: float
    bytes_per_s: float
    source: str  # where the figures come from, in words
    dtype: str = "fp32"  # the precision of flops_per_s: an fp32 GEMM (a CPU's calibration), fp16 (an NPU's cube)
    more_flops: tuple[tuple[str, float], ...] = ()  # (precision, FLOP/s) measured besides ``dtype``'s

    def flops_at(self, precision: str | None) -> float | None:
        """The FLOP/s peak for an op of ``precision``: its own when known; ``flops_per_s`` for an op as wide as
        ``dtype`` or wider (it cannot run faster than the narrower peak); None for a narrower one with no peak
        of its own (its hardware path may be faster: no lower bound)."""
        own = dict(self.more_flops)
        if precision in own:
            return own[precision]
        if precision is None or PRECISION_BITS.get(precision, 32) >= PRECISION_BITS.get(self.dtype, 32):
            return self.flops_per_s
        return None


# ESTIMATES: cube cores x 16*16*16 fp16 MACs x 2 FLOP x cube clock, and a memory bandwidth, per SoC.
# The core counts, clocks and bandwidths below were not read from a CANN or Ascend source, so every
# figure is labelled an estimate wherever it is printed (Peaks.source). Use them to rank ops, not to
# grade a kernel to the percent; on a real device, calibrate or read the SoC's platform config instead.
# fp32 MatMul runs below the fp16 peak, so using the fp16 peak for every dtype keeps the bound a
# lower bound as long as the figures are not too low.
_CUBE_FLOP_PER_CYCLE = 16 * 16 * 16 * 2
DEVICE_PEAKS: dict[str, Peaks] = {
    name: Peaks(
        name,
        cores * _CUBE_FLOP_PER_CYCLE * ghz * 1e9,
        gbps * 1e9,
        f"estimate (no published source): {cores} cube cores x 8192 FLOP/cycle x {ghz} GHz, {gbps:g} GB/s memory",
        dtype="fp16",
    )
    for name, cores, ghz, gbps in [
        ("Ascend910B1", 24, 1.85, 1600),
        ("Ascend910B2", 24, 1.8, 1600),
        ("Ascend910B3", 20, 1.8, 1600),
        ("Ascend910B4", 20, 1.5, 800),
        ("Ascend310P3", 8, 1.08, 204.8),
    ]
}


def device_peaks(soc: str) -> Peaks | None:
    """The table entry for a SoC name (``Ascend910B3``, ``910B3`` and ``ascend910b3`` all work)."""
    key = soc.strip().lower().removeprefix("ascend")
    for name, peaks in DEVICE_PEAKS.items():
        if name.lower().removeprefix("ascend") == key:
            return peaks
    return None


# --- shapes --------------------------------------------------------------------------------------
_DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "dt_float": 4,
    "fp32": 4,
    "int32": 4,
    "dt_int32": 4,
    "uint32": 4,
    "float16": 2,
    "dt_float16": 2,
    "half": 2,
    "fp16": 2,
    "bfloat16": 2,
    "dt_bf16": 2,
    "bf16": 2,
    "int16": 2,
    "dt_int16": 2,
    "int8": 1,
    "dt_int8": 1,
    "uint8": 1,
    "dt_uint8": 1,
    "bool": 1,
    "dt_bool": 1,
    "double": 8,
    "float64": 8,
    "dt_double": 8,
    "int64": 8,
    "dt_int64": 8,
    "long": 8,
    "uint16": 2,
    "dt_uint16": 2,
    "dt_uint32": 4,
    "uint64": 8,
    "dt_uint64": 8,
}
# Arguments that are not tensors (torch's record_shapes names them by kind, with an empty shape):
# nothing moves through memory for them.
_NOT_TENSORS = {"scalar", "scalarlist", "none", "genericlist", "string", "tensorlist"}  # a list: no shapes


def parse_shapes(text: str | None) -> list[tuple[int, ...]] | None:
    """``"1024;32,1024;1024,1024"`` -> [(1024,), (32, 1024), (1024, 1024)]; None when absent or unreadable."""
    if not text or text.strip().upper() == "N/A":
        return None
    shapes = []
    for part in text.strip().strip('"').split(";"):
        part = part.strip()
        if part == "":
            shapes.append(())  # a scalar
            continue
        if not re.fullmatch(r"\d+(,\d+)*", part):
            return None
        shapes.append(tuple(int(x) for x in part.split(",")))
    return shapes


def dtype_sizes(text: str | None, n: int) -> list[int] | None:
    """Bytes per element of each of ``n`` tensors; None when a dtype is missing or unknown."""
    if not text or text.strip().upper() == "N/A":
        return None
    names = [p.strip().lower() for p in text.split(";")]
    if len(names) != n:
        return None
    sizes = [0 if name in _NOT_TENSORS else _DTYPE_BYTES.get(name) for name in names]
    return None if any(s is None for s in sizes) else sizes


def op_work(task: Task) -> Work | str:
    """The FLOPs and bytes a task's shapes imply, or why they cannot be known (a short reason string):
    matmul here, conv / attention / recurrent / norm / embedding / pool / resize in work_models, element-wise
    families below."""
    inputs = parse_shapes(task.input_shapes)
    if inputs is None:
        return "no Input Shapes in the profile"
    sizes = dtype_sizes(task.input_dtypes, len(inputs))
    if sizes is None:
        return "no or unknown Input Data Types in the profile"
    outputs = parse_shapes(task.output_shapes)
    out_sizes = dtype_sizes(task.output_dtypes, len(outputs)) if outputs else None
    family = op_family(task.op_type)
    if family == "matmul":
        return _matmul_work(inputs, sizes, outputs, out_sizes)
    if family in work_models.MODELS:
        return work_models.MODELS[family](
            task.op_type, work_models.tensors(inputs, sizes), work_models.tensors(outputs, out_sizes)
        )
    # Element-wise families read every input once and write an output the size of the largest
    # input, at least one operation per output element. Any other op is modelled so only when its
    # tensor inputs all have one size.
    numels = [math.prod(s) for s in inputs]
    if family not in ELEMENTWISE_FAMILIES and len({n for s, n in zip(inputs, numels) if s}) > 1:
        return work_models.NO_MODEL.get(family, f"{family}: inputs of different sizes, not element-wise")
    out_numel = math.prod(outputs[0]) if outputs else max(numels)
    out_size = out_sizes[0] if out_sizes else sizes[numels.index(max(numels))]
    moved = sum(n * b for n, b in zip(numels, sizes)) + out_numel * out_size
    flops = 0.0 if family in NO_ARITHMETIC_FAMILIES else float(out_numel)
    return Work(
        flops,
        float(moved),
        f"element-wise: read inputs, write {out_numel} elements, "
        f"{'no arithmetic' if not flops else '>= 1 FLOP per element'}",
    )


def _matmul_work(inputs, sizes, outputs, out_sizes) -> Work | str:
    mats = [(s, b) for s, b in zip(inputs, sizes) if len(s) >= 2]
    if not mats:
        return "no matrix among the Input Shapes"
    (a, a_bytes) = mats[0]
    bias = sum(math.prod(s) * b for s, b in zip(inputs, sizes) if len(s) < 2)
    if outputs and len(outputs[0]) >= 2:
        out = outputs[0]
        m, n, batch = out[-2], out[-1], math.prod(out[:-2])
        if math.prod(a) % (batch * m):
            return f"shapes disagree: A {a} is not a multiple of M={m}"
        k = math.prod(a) // (batch * m)
        if len(mats) > 1:
            b_shape = mats[1][0]
            b_batch = math.prod(b_shape) // (k * n) if (k * n) and math.prod(b_shape) % (k * n) == 0 else None
            if b_batch is None or b_batch not in (1, batch):
                return f"shapes disagree: A {a} implies K={k}, which B {b_shape} does not hold with N={n}"
            b_elems, b_size = math.prod(b_shape), mats[1][1]
        else:  # the weight is a constant folded into the op (ONNX initializer): K x N of it
            b_elems, b_size = k * n, a_bytes
        out_size = out_sizes[0] if out_sizes else a_bytes
    else:
        if len(mats) < 2:
            return "one matrix input and no Output Shapes: K or N unknown"
        (a, a_bytes), (b_shape, b_size) = mats[-2], mats[-1]
        if a[-1] != b_shape[-2]:
            return f"shapes disagree: A {a} x B {b_shape} (inner dimensions {a[-1]} != {b_shape[-2]})"
        m, k, n, batch = a[-2], a[-1], b_shape[-1], math.prod(a[:-2])
        b_elems, out_size = math.prod(b_shape), a_bytes
    flops = 2.0 * batch * m * n * k
    moved = math.prod(a) * a_bytes + b_elems * b_size + batch * m * n * out_size + bias
    return Work(flops, float(moved), f"matmul {batch}x[{m}x{k}] @ [{k}x{n}]: 2*M*N*K FLOPs")


# --- per op: lower bound, achieved fraction, roofline side ------------------------------------------
@dataclass(frozen=True)
class OpBound:
    op_type: str
    shapes: str
    count: int
    mean_us: float
    work: Work | None
    reason: str | None  # why there is no bound, when there is none
    compute_us: float | None = None
    memory_us: float | None = None

    @property
    def lower_bound_us(self) -> float | None:
        if self.memory_us is None:
            return None
        if self.compute_us is None:  # no peak of the op's precision: the bytes alone still bound it
            return self.memory_us
        return max(self.compute_us, self.memory_us)

    @property
    def achieved(self) -> float | None:
        """Lower bound / measured mean: 1.0 would be running at the device's peak."""
        lb = self.lower_bound_us
        return lb / self.mean_us if lb is not None and self.mean_us else None

    @property
    def bound(self) -> str | None:
        if self.lower_bound_us is None:
            return None
        if self.compute_us is None:
            return f"memory at least ({self.reason})"
        return "compute" if self.compute_us >= self.memory_us else "memory"

    @property
    def verdict(self) -> str:
        """The Bound column: the roofline side, a warning when the bound is not tight, or why there is none."""
        if self.bound is None:
            return f"unavailable: {self.reason}"
        if self.achieved is not None and self.achieved > 1:
            # faster than the peak: the data came from a faster level (cache) than the peak measures
            return f"{self.bound}; faster than the peak, so the peak does not limit it (cached data?)"
        return self.bound


# Bits of each precision the lab recognises in an op's Input Data Types: a compute lower bound from a peak of a
# wider precision than the op's (a bf16 MatMul against a CPU's fp32 GEMM peak) is no lower bound at all.
PRECISION_BITS = {"fp32": 32, "fp16": 16, "bf16": 16}
_PRECISIONS = {
    "float": "fp32",
    "float32": "fp32",
    "dt_float": "fp32",
    "fp32": "fp32",
    "float16": "fp16",
    "dt_float16": "fp16",
    "half": "fp16",
    "fp16": "fp16",
    "bfloat16": "bf16",
    "dt_bf16": "bf16",
    "bf16": "bf16",
}


def op_precision(input_dtypes: str | None) -> str | None:
    """The floating-point precision of an op's first input (``FLOAT16;FLOAT16`` -> fp16); None when not one."""
    first = (input_dtypes or "").strip().strip('"').split(";")[0].strip().lower()
    first = first.removeprefix("torch.").removeprefix("c10::")  # torch.bfloat16, c10::BFloat16 (a raw trace)
    return _PRECISIONS.get(first)


COMPUTE_FAMILIES = ("matmul", "conv", "attention", "recurrent")


def compute_precision(tasks: list[Task]) -> str | None:
    """The precision most of the compute ops' time ran in (matmul, conv, attention, recurrent); None if unknown."""
    return precision_of(time_by_op_and_dtypes(tasks))


def precision_of(dtype_us: dict[tuple[str, str], float]) -> str | None:
    """compute_precision over time summed per (OP Type, Input Data Types) (common.formats.run_ops.RunOps.dtype_us)."""
    time: dict[str, float] = {}
    for (op_type, dtypes), us in dtype_us.items():
        if op_family(op_type) in COMPUTE_FAMILIES and (p := op_precision(dtypes)):
            time[p] = time.get(p, 0.0) + us
    return max(time, key=time.get) if time else None


def op_bounds(tasks: list[Task], peaks: Peaks | None) -> list[OpBound]:
    """One row per (OP Type, Input Shapes), slowest total first; no bound without shapes or peaks, and no compute
    bound for an op of a narrower precision than the peak's (its own peak may be higher: judged by nothing)."""
    groups: dict[tuple[str, str], list[Task]] = {}
    for t in tasks:
        groups.setdefault((t.op_type, t.input_shapes or "N/A"), []).append(t)
    rows = []
    for (op_type, shapes), group in groups.items():
        mean = statistics.fmean(t.duration_us for t in group)
        work = op_work(group[0])
        if isinstance(work, str):
            rows.append(OpBound(op_type, shapes, len(group), mean, None, work))
        elif peaks is None:
            rows.append(OpBound(op_type, shapes, len(group), mean, work, "no device peaks for this data"))
        else:
            own = op_precision(group[0].input_dtypes)
            flops_per_s = peaks.flops_at(own)
            memory_us = 1e6 * work.bytes / peaks.bytes_per_s
            if work.flops and flops_per_s is None:
                rows.append(
                    OpBound(
                        op_type,
                        shapes,
                        len(group),
                        mean,
                        work,
                        f"{own} op, no {own} peak ({peaks.dtype} measured): no compute bound",
                        None,
                        memory_us,
                    )
                )
            else:
                rows.append(
                    OpBound(
                        op_type,
                        shapes,
                        len(group),
                        mean,
                        work,
                        None,
                        1e6 * work.flops / flops_per_s if work.flops else 0.0,
                        memory_us,
                    )
                )
    return sorted(rows, key=lambda r: -r.mean_us * r.count)


# --- per op with PMU data: the dominant pipe ------------------------------------------------------
# A pipe "dominates" when it is busy for the largest share of the op's core time; the verdict
# says more when that share is large: >= 0.8 the op is limited by that pipe; cube/vector below 0.5
# while scalar leads means instruction issue and bookkeeping, not arithmetic, set the pace; MTE2/MTE3
# leading means data movement between global memory and the core's buffers does.
DOMINANT_RATIO = 0.8
COMPUTE_PIPE_LOW = 0.5
PIPE_GROUPS = {
    "aic_mac": "compute (cube)",
    "aiv_vec": "compute (vector)",
    "aic_scalar": "scalar",
    "aiv_scalar": "scalar",
    "aic_mte1": "data movement (MTE1, L1 -> L0)",
    "aic_mte2": "data movement (MTE2, GM -> core)",
    "aiv_mte2": "data movement (MTE2, GM -> core)",
    "aiv_mte3": "data movement (MTE3, core -> GM)",
    "aic_fixpipe": "data movement (fixpipe, L0C -> GM)",
}


@dataclass(frozen=True)
class PipeVerdict:
    op_type: str
    count: int
    ratios: dict[str, float]
    pipe: str
    text: str


def mean_pmu(tasks: list[Task], columns) -> dict[str, float | None]:
    """Per PMU column (``aiv_vec_ratio``, ``aiv_time(us)`` ...), its mean over the tasks that report it; None where
    none does."""
    out: dict[str, float | None] = {}
    for column in columns:
        values = [v for t in tasks if (v := t.pmu.get(column)) is not None]
        out[column] = statistics.fmean(values) if values else None
    return out


def mean_pipe_ratios(tasks: list[Task], pipes) -> dict[str, float | None]:
    """Per pipe (a PMU column prefix: ``aiv_vec``, ``aic_mac`` ...), the mean of its ``<pipe>_ratio`` over the
    tasks that report it; None where none does."""
    found = mean_pmu(tasks, [f"{pipe}_ratio" for pipe in pipes])
    return {pipe: found[f"{pipe}_ratio"] for pipe in pipes}


def busiest_pipe(ratios: dict[str, float | None]) -> tuple[str, float] | None:
    """The pipe with the largest busy ratio (the first of equals), the one to make cheaper first; None without
    ratios."""
    known = {p: r for p, r in ratios.items() if r is not None}
    if not known:
        return None
    pipe = max(known, key=known.get)
    return pipe, known[pipe]


def pipe_verdicts(tasks: list[Task]) -> list[PipeVerdict]:
    """Per OP Type with *_ratio PMU columns: which pipe was busiest, and what that means."""
    groups: dict[str, list[Task]] = {}
    for t in tasks:
        if any(k.endswith("_ratio") and v is not None for k, v in t.pmu.items()):
            groups.setdefault(t.op_type, []).append(t)
    out = []
    for op_type, group in groups.items():
        ratios = {p: r for p, r in mean_pipe_ratios(group, PIPE_GROUPS).items() if r is not None}
        # a core that did not run (time 0) reports 0 ratios; look at the core that did
        used = {p: r for p, r in ratios.items() if r > 0} or ratios
        found = busiest_pipe(used)
        if found is None:
            continue
        pipe, value = found
        compute = max((used.get(p, 0.0) for p in ("aic_mac", "aiv_vec")), default=0.0)
        role = PIPE_GROUPS[pipe]
        if value >= DOMINANT_RATIO:
            text = f"{pipe} {value:.2f} >= {DOMINANT_RATIO}: limited by {role}"
        else:
            text = f"{pipe} {value:.2f} leads ({role}), no pipe >= {DOMINANT_RATIO}: pipes overlap or wait"
        if role == "scalar" and compute < COMPUTE_PIPE_LOW:
            text += (
                f"; compute pipes at {compute:.2f} < {COMPUTE_PIPE_LOW}: issue and bookkeeping set the pace "
                "(larger tiles, fewer loop trips and syncs)"
            )
        elif role.startswith("data movement"):
            text += "; hypothesis: memory-bound on the core's side (double-buffer, larger contiguous copies)"
        out.append(PipeVerdict(op_type, len(group), ratios, pipe, text))
    return out


# --- per run: host-bound or device-bound, and what to try ----------------------------------------
def run_hint(
    summary: StepSummary,
    per_step_tasks: float | None,
    median_task_us: float | None,
    precision: str | None = None,
    samples: int | None = None,
) -> list[str]:
    """The Computing:Free verdict as a hypothesis: what it suggests trying (knowing the compute's ``precision``,
    compute_precision, and the run's ``samples`` per step), and the evidence."""
    ratio = summary.computing_ratio
    free_per_task = summary.median_free_us / per_step_tasks if per_step_tasks else None
    evidence = (
        f"evidence: Computing {summary.median_computing_us:.1f} us : Free {summary.median_free_us:.1f} us "
        f"per step ({100 * ratio:.1f}% computing, threshold {100 * HOST_BOUND_BELOW:.0f}%)"
    )
    if per_step_tasks:
        evidence += f"; {per_step_tasks:g} tasks per step"
        if median_task_us is not None:
            evidence += f", median task {median_task_us:.1f} us, {free_per_task:.1f} us of Free per task"
    if ratio < HOST_BOUND_BELOW:
        lines = [
            "hypothesis: host-bound — the device waits for the host between tasks, so faster kernels would "
            "not shorten the step.",
            f"try: {batch_try(samples)}; fuse small "
            "ops (fewer launches); graph mode / an offline model (mode 03) to take Python dispatch off the "
            "critical path; remove host syncs (.item(), .cpu(), prints) inside the step.",
        ]
    else:
        lines = [
            "hypothesis: device-bound — the device is busy most of the step, so the kernels themselves are the cost.",
            f"try: the ops with the lowest achieved fraction of their lower bound first; {precision_try(precision)}; "
            "fusing element-wise ops into their neighbours to save memory traffic.",
        ]
    return lines + [evidence]
