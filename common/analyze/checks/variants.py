"""Mode 03's checks on each precision variant of its offline model: the outputs against the fp32 reference by a
tolerance relative to each output's scale, the ops that ran against the graph the runtime was given, and the Cast
lesson as the workload declares it. The harness reads the variant's profile and outputs and hands them in."""

from __future__ import annotations

from collections import Counter

from common.analyze.checks.outputs import check_output
from common.analyze.grouping import tasks_by_execute
from common.analyze.checks.timing import check_top_family
from common.analyze.families import family_share
from common.formats.engine import np
from common.formats.records import OpStat, Task
from common.verdict import Verdict, not_applicable
from common.workload import Expected, compare_outputs

# Accuracy against the fp32 reference, per output. Rounding error grows with the values computed,
# so the bound is relative to the output's own scale (max |reference|): the same check holds for
# outputs of ~0.1 (TinyMLP) and of ~100. fp16 keeps 11 significant bits (~3 decimal digits) and
# every layer sums many rounded products, so an fp16 path agrees in direction (cosine), not digit
# by digit; 0.999 is the usual acceptance line for fp16 inference.
COSINE_MIN = 0.999
FP16_REL_TOL = 2e-2  # 2^-11 ~ 4.9e-4 per rounding, compounded over layers, norms and softmax: 2% of the
# scale is far above that and far below a wrong op, which moves an output by its own size
FP32_REL_TOL = 1e-3  # an NPU's fp32 MatMul may sum in another order, or in HF32 where --allow_hf32 enables it
FP16_ABS_FLOOR = 1e-5  # an output of scale ~0 still meets fp16's spacing near 0.01 (2^-17 ~ 7.6e-6)
FP32_ABS_FLOOR = 1e-6
FP16_SMALLEST_NORMAL, FP16_MAX = 2.0**-14, 65504.0  # IEEE half precision: its normal range


def tolerance(fp16_compute: bool, scale: float) -> float:
    """Max abs diff allowed for an output whose largest reference magnitude is ``scale``."""
    if fp16_compute:
        return FP16_REL_TOL * scale + FP16_ABS_FLOOR
    return FP32_REL_TOL * scale + FP32_ABS_FLOOR


def fp16_range(scale: float) -> str | None:
    """Why fp16 cannot represent an output whose largest magnitude is ``scale`` (None: it can): below its smallest
    normal number every value is subnormal (fewer significant bits, down to none) or zero; above its largest, inf."""
    if scale < FP16_SMALLEST_NORMAL:
        return f"max|reference| {scale:.3g} is below fp16's smallest normal number {FP16_SMALLEST_NORMAL:.3g}"
    if scale > FP16_MAX:
        return f"max|reference| {scale:.3g} is above fp16's largest number {FP16_MAX:g}"
    return None


def output_accuracy(names: list[str], outputs: list, reference, fp16_compute: bool) -> list[dict]:
    """Per output (as many as the reference has): max/mean abs diff and cosine against the reference, its scale and
    its tolerance (and, for an fp16 variant, why fp16 cannot hold it when it cannot)."""
    rows = []
    for name, out, ref in zip(names, outputs, reference):
        scale = float(np.abs(ref).max()) if ref.size else 0.0
        too_small_or_large = fp16_range(scale) if fp16_compute else None
        rows.append(
            {
                "name": name,
                **compare_outputs(out.astype(np.float32), ref),
                "scale": scale,
                "tol": tolerance(fp16_compute, scale),
                "cosine_min": COSINE_MIN,
                **({"fp16_range": too_small_or_large} if too_small_or_large else {}),
            }
        )
    return rows


def check_variant_outputs(name: str, outputs: list[dict], fp16_compute: bool) -> list[Verdict]:
    """Each output of variant ``name`` (:func:`output_accuracy`'s rows) within its tolerance; a failure points at the
    per-op precision command, an output fp16 cannot hold is said as it is ([N/A])."""
    several = len(outputs) > 1
    rel, floor = (FP16_REL_TOL, FP16_ABS_FLOOR) if fp16_compute else (FP32_REL_TOL, FP32_ABS_FLOOR)
    verdicts = []
    for o in outputs:
        v = check_output(o, f"{name}, output {o['name']}" if several else name, o["tol"], COSINE_MIN)
        if not v.applicable:  # the fp16 variant's range, not an error: said as it is
            verdicts.append(v)
            continue
        per_op = "" if v.ok else "; which op diverges first: nox -s precision -- <device> (docs/precision.md)"
        verdicts.append(
            Verdict(v.name, v.ok, f"{v.detail}; tol = {rel:g} x max|reference| {o['scale']:.3g} + {floor:g}{per_op}")
        )
    return verdicts


def check_variant_files(name: str, found: list[tuple[str, int, int | str]]) -> Verdict:
    """Variant ``name``'s files exist, have rows and carry the columns msprof writes: ``found`` holds, per file, its
    name, how many columns were required, and its rows (or why it could not be read)."""
    ok = all(isinstance(rows, int) and rows > 0 for _, _, rows in found)
    parts = [f"{file} {columns} columns, {rows} rows" for file, columns, rows in found]
    return Verdict(f"files and columns ({name})", ok, "; ".join(parts))


def check_measured_window(name: str, ok: bool, how: str) -> Verdict:
    """The measured executes were cut out of what the profiler recorded as ``how`` says (``ok``: every one found)."""
    return Verdict(f"measured window ({name})", ok, how)


def check_graph_holds(frozen: list[str]) -> Verdict | None:
    """Where the tracer turned tensors into Python values (``frozen``: file:line places), the exported graph holds
    for this input only: said as [N/A], with the places (None: nothing was frozen)."""
    if not frozen:
        return None
    more = f" and {len(frozen) - 3} more" if len(frozen) > 3 else ""
    return not_applicable(
        "the exported graph holds for other inputs (03)",
        f"not applicable: the trace turned tensors into Python values at {', '.join(frozen[:3])}{more}; the graph "
        "keeps them as constants: a shape's value holds for any input of this shape, a branch or a loop count on the "
        "input's values for this input only (03 profiles the path this input takes)",
    )


def check_graph_counts(tasks: list[Task], graph_counts: dict[str, int], executes: int, name: str) -> Verdict:
    """Each op type runs per execute exactly as often as the built graph holds it: what ran is counted against the
    graph the runtime was given, never against the eager model, which an exporter and a converter rewrite."""
    measured = Counter(t.op_type for t in tasks)
    parts, ok = [], True
    for op_type in sorted(set(graph_counts) | set(measured)):
        got, want = measured.get(op_type, 0) / executes, graph_counts.get(op_type, 0)
        ok &= got == want
        parts.append(f"{op_type} {got:g} (graph {want})")
    return Verdict(name, ok, ", ".join(parts))


def check_cast_lesson(name: str, tasks: list[Task], stats: list[OpStat], executes: int, expected: Expected):
    """The Cast lesson on variant ``name``, as the workload declares it (TinyMLP: matmul on top, Casts only from the
    converter's policy): its top family; on ``default`` the boundary Casts, on ``fp32`` none. [N/A] where the
    workload declares nothing, with what was measured."""
    casts = sum(1 for t in tasks if t.op_type == "Cast") / executes
    shares = family_share(stats, ("init",))
    family = max(shares, key=shares.get) if shares else "none"
    measured = f"measured: {family} on top ({100 * shares.get(family, 0.0):.1f}%), {casts:g} Cast per execute"
    top, cast = expected.expectations.get("top_family"), expected.expectations.get("cast_on_03_default")
    per_execute = tasks_by_execute(tasks, executes)
    verdicts = [
        check_top_family(stats, top, name, groups=per_execute, unit="execute")
        if top
        else not_applicable(f"declared top family ({name})", f"{expected.not_applicable('top_family')}; {measured}")
    ]
    no_cast_expectation = f"{expected.not_applicable('cast_on_03_default')}; {measured}"
    if name == "default":  # the converter's fp16 policy with fp32 IO must show its boundary Casts
        verdicts.append(
            not_applicable("Cast present (default)", no_cast_expectation)
            if cast is None
            else Verdict(
                f"Cast {'present' if cast else 'absent'} (default)",
                (casts > 0) == cast,
                f"{casts:g} Cast per execute, {100 * family_share(stats).get('cast', 0.0):.1f}% of op time",
            )
        )
    if name == "fp32":  # the model's own dtype: no precision change, so no Cast
        verdicts.append(
            not_applicable("Cast absent (fp32)", no_cast_expectation)
            if cast is None
            else Verdict("Cast absent (fp32)", casts == 0, f"{casts:g} Cast per execute")
        )
    return verdicts
