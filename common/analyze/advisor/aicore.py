"""Cube, FlashAttention and Vector operator performance: which op is bound by which pipe, how far the
others are from a bound (the optimization space), and which shapes the hardware dislikes.

As msprof-analyze's advisor picks and judges them (``computation/ai_core_performance/
ai_core_performance_checker.py``, thresholds in ``rules/en/aicore_performance.yaml``), per op name and
shape (the mean of its tasks' pipe ratios):

- Cube: AI_CORE MatMul ops moving at least 100 MB per shape over the capture; a shape is unaffine
  unless its inner axes are multiples of 256 (ND: each input's last axis; NZ: axis 1 x axis 2);
  bound by mac (>= 0.95, as the advisor's code compares it) or mte2 (>= 0.95), both (mac >= 0.8
  and mte2 >= 0.95), else the space is max(0.8 - mac, 0.95 - mte2).
- FlashAttention (FlashAttentionScore / ...Grad): unaffine when the head dim D or the sequence S is
  not a multiple of 128; forward bound by mte2 ("mac", >= 0.8) or vec (>= 0.75), backward by mte2
  (>= 0.8) or fixpipe (>= 0.75).
- Vector: the vector-core op types taking at least 1% of all task time; bound when vec + mte2 + mte3
  >= 0.9, else by mte2, mte3 or vec (>= 0.7 each); else the space is the largest distance to 0.7.

Each set keeps its top 5: the space largest first; bound and unaffine ops by time.
"""

from __future__ import annotations

import math

from common.analyze.advisor import Finding, clear, found, not_run

SOURCE = (
    "msprof-analyze advisor computation/ai_core_performance/ai_core_performance_checker.py and "
    "rules/en/aicore_performance.yaml"
)
CUBE_MIN_MB = 100  # CUBE_OPERATOR_MEMORY_SIZE_MB
VECTOR_MIN_SHARE = 0.01
TOP = 5
SETS = ("performance optimization", "bound", "unaffine")


def _key(t) -> str:
    return f"{t.input_shapes or ''}-{t.output_shapes or ''}"


def _dims(shape: str | None) -> list[str]:
    return (shape or "").split(",")


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


def _memory_mb(t) -> float:
    total = 0
    for shape in (t.input_shapes or "").split(";"):
        if shape and "," not in shape:
            total += _int(shape) * 2  # a 1-D input: the bias, counted twice as the advisor does
        elif shape:
            total += math.prod(_int(d) for d in shape.split(","))
    for shape in (t.output_shapes or "").split(";"):
        total += math.prod(_int(d) for d in shape.split(",")) if shape else 0
    return total * 2 / 1024 / 1024


def _cube_unaffine(t) -> str | None:
    shapes = (t.input_shapes or "").split(";")
    if len(shapes) < 2:
        return "fewer than two inputs"
    a, b = _dims(shapes[0]), _dims(shapes[1])
    if len(a) == 4 and len(b) == 4:
        ok = _int(a[1]) * _int(a[2]) % 256 == 0 and _int(b[1]) * _int(b[2]) % 256 == 0
    elif len(a) == 2:
        ok = _int(a[-1]) % 256 == 0 and _int(b[-1]) % 256 == 0
    else:
        ok = False
    return None if ok else "the inner axis is not a multiple of 256"


def _fa_unaffine(t) -> str | None:
    first_in = _dims((t.input_shapes or "").split(";")[0])
    first_out = _dims((t.output_shapes or "").split(";")[0])
    if "varlen" in t.op_name.lower():
        d = _int(first_in[2]) if len(first_in) >= 3 else 0
        return None if d % 128 == 0 else "D is not a multiple of 128"
    s = _int(first_out[2]) if len(first_out) > 2 and len(first_out[2]) >= 3 else 0
    if len(first_in) == 3:
        heads = _int(first_out[1]) if len(first_out) > 1 else 0
        d = _int(first_in[2]) // heads if heads else 0
    else:
        d = _int(first_in[3]) if len(first_in) > 3 else 0
    bad = [name for name, v in (("D", d), ("S", s)) if v % 128]
    return f"{' and '.join(bad)} not a multiple of 128" if bad else None


def _mean(tasks, column: str) -> float | None:
    values = [t.pmu.get(column) for t in tasks if t.pmu.get(column) is not None]
    return sum(values) / len(values) if values else None


def _judge(kind: str, tasks) -> tuple[str, float] | None:
    """(bound, 0) or ("", space) from the mean ratios; None without them."""
    if kind == "cube":
        mac, mte2 = _mean(tasks, "aic_mac_ratio"), _mean(tasks, "aic_mte2_ratio")
        if mac is None or mte2 is None:
            return None
        if mac >= 0.8 and mte2 >= 0.95:
            return "mac_and_mte2_bound", 0.0
        if mac >= 0.95 or mte2 >= 0.95:
            return ("mac" if mac >= 0.95 else "mte2"), 0.0
        return "", max(0.8 - mac, 0.95 - mte2)
    if kind == "fa":
        mte2 = _mean(tasks, "aic_mte2_ratio")
        other, name, limit = (
            ("aic_fixpipe_ratio", "fixpipe", 0.75)
            if tasks[0].op_type.endswith("Grad")
            else ("aiv_vec_ratio", "vec", 0.75)
        )
        second = _mean(tasks, other)
        if mte2 is None or second is None:
            return None
        if mte2 >= 0.8 and second >= limit:
            return (f"{name}_and_mac_bound" if name == "fixpipe" else "mac_and_vec_bound"), 0.0
        if mte2 >= 0.8 or second >= limit:
            return ("mac" if mte2 >= 0.8 else name), 0.0
        return "", max(limit - second, 0.8 - mte2)
    vec, mte2, mte3 = (_mean(tasks, c) for c in ("aiv_vec_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio"))
    if vec is None or mte2 is None or mte3 is None:
        return None
    if vec + mte2 + mte3 >= 0.9:
        return "vec_mte2_mte3", 0.0
    for name, value in (("mte2", mte2), ("mte3", mte3), ("vec", vec)):
        if value >= 0.7:
            return name, 0.0
    return "", max(0.7 - vec, 0.7 - mte2, 0.7 - mte3)


def _candidates(tasks) -> dict[str, dict[tuple[str, str], list]]:
    total = sum(t.duration_us for t in tasks)
    picked: dict[str, dict[tuple[str, str], list]] = {"cube": {}, "fa": {}, "vector": {}}
    vector_types: dict[str, list] = {}
    for t in tasks:
        if not t.input_shapes and not t.output_shapes:  # the advisor also keeps a row whose one side is ""
            continue
        if t.task_type == "AI_CORE" and "matmul" in t.op_type.lower():
            picked["cube"].setdefault((t.op_name, _key(t)), []).append(t)
            continue
        if t.op_type in ("FlashAttentionScore", "FlashAttentionScoreGrad"):
            picked["fa"].setdefault((t.op_name, _key(t)), []).append(t)
        if t.task_type in ("AI_VECTOR_CORE", "MIX_AIV"):
            vector_types.setdefault(t.op_type, []).append(t)
    picked["cube"] = {k: v for k, v in picked["cube"].items() if sum(map(_memory_mb, v)) >= CUBE_MIN_MB}
    for ts in vector_types.values():
        spent = sum(t.duration_us for t in ts)
        if total and (spent / total >= VECTOR_MIN_SHARE or spent >= 1e6):
            for t in ts:
                picked["vector"].setdefault((t.op_name, _key(t)), []).append(t)
    return picked


def _sets(kind: str, groups: dict) -> dict[str, list[list[object]]]:
    out: dict[str, list[list[object]]] = {s: [] for s in SETS}
    for (name, _), ts in groups.items():
        spent = round(sum(t.duration_us for t in ts), 3)
        why = _cube_unaffine(ts[0]) if kind == "cube" else _fa_unaffine(ts[0]) if kind == "fa" else None
        if why:
            out["unaffine"].append([name, ts[0].input_shapes, ts[0].input_dtypes, spent, why])
            continue
        judged = _judge(kind, ts)
        if judged is None:
            continue
        bound, space = judged
        if bound:
            out["bound"].append([name, ts[0].input_shapes, ts[0].input_dtypes, spent, f"{bound} bound"])
        else:
            out["performance optimization"].append(
                [name, ts[0].input_shapes, ts[0].input_dtypes, spent, f"{round(space * 100, 2)}% from a bound"]
            )
    out["performance optimization"].sort(key=lambda r: -float(r[4].split("%")[0]))
    out["bound"].sort(key=lambda r: -r[3])
    out["unaffine"].sort(key=lambda r: -r[3])
    return {s: rows[:TOP] for s, rows in out.items() if rows}


def _rule(kind: str, title: str, fix: str | None):
    rule = f"{title} Operator Perf Analysis"

    def check(rank) -> Finding:
        threshold = f"{title} ops as the advisor selects and judges them ({SOURCE})"
        if not rank.tasks or not any(t.input_shapes for t in rank.tasks):
            return not_run(
                rule, "the task table has no Input Shapes (Level0 or a task table without shapes)", threshold
            )
        sets = _sets(kind, _candidates(rank.tasks)[kind])
        if not sets:
            return clear(rule, f"no {title} op selected (or none with pipe ratios to judge)", threshold)
        rows = [[s, *r] for s, rs in sets.items() for r in rs]
        named = "; ".join(f"{s}: {', '.join(dict.fromkeys(r[0] for r in rs))}" for s, rs in sets.items())
        return found(
            rule,
            f"{named}. A bound op is as fast as that pipe allows (a smaller dtype or fewer bytes moved "
            "help); a space says how far the best pipe is from its bound (its tiling or shape limits it); "
            "an unaffine shape wastes cube or vector lanes",
            threshold,
            remedy="pad or choose shapes with aligned inner axes; AOE for the ops with space",
            fix=fix,
            figures={s: list(dict.fromkeys(r[0] for r in rs)) for s, rs in sets.items()},
            header=["Set", "Op", "Input Shapes", "Dtypes", "Total(us)", "Judgement"],
            rows=rows,
        )

    check.__name__ = f"{kind}_performance"
    return check


cube_performance = _rule("cube", "Cube", "hf32")
fa_performance = _rule("fa", "FA", None)
vector_performance = _rule("vector", "Vector", "aoe")
RULES = (cube_performance, fa_performance, vector_performance)
