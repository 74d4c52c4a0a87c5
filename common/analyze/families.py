"""Op families: one table maps NPU op types and portable names to a family; shares, counts, top ops.

Pure functions over parsed rows; nothing here reads files or prints.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from common.formats.records import OpStat, Task

# One table maps NPU op types and portable (PyTorch / ONNX Runtime / AscendC twin) names to a family.
# Patterns are matched against the lower-cased OP Type; the first match wins.
OP_FAMILIES: list[tuple[str, str]] = [
    ("cast", r"^cast$|^aten::(_to_copy|to)$|^aten::_?cast"),
    ("matmul", r"matmul|^gemm$|^fusedmatmul$|^aten::(addmm|mm|bmm|baddbmm|matmul|linear)$"),
    # Erf: ONNX Runtime runs an unfused GELU as x * 0.5 * (1 + Erf(x / sqrt 2)), one Erf per GELU;
    # its Div/Mul/Add neighbours stay in their own families.
    ("gelu", r"gelu|^aten::(relu|silu|tanh|sigmoid)$|^(relu|fastgelu|erf|swish|silu|sigmoid)$"),
    ("init", r"random|^aten::(uniform_|normal_|randn|rand|kaiming_uniform_|zero_|fill_|empty)$|^dsa"),
    ("memcpy", r"memcpy|^aten::copy_$|^transdata$|^identity$"),
    ("add", r"^add$|^aten::add_?$|^add_custom$"),
]
FAMILY_ORDER = ["matmul", "gelu", "cast", "add", "memcpy", "init", "other"]


def op_family(op_type: str) -> str:
    """The family (matmul, gelu, cast, add, memcpy, init, other) of an NPU or portable op type."""
    name = op_type.strip().lower()
    for family, pattern in OP_FAMILIES:
        if re.search(pattern, name):
            return family
    return "other"


def family_time(stats: list[OpStat]) -> dict[str, float]:
    """Total µs per family."""
    totals: dict[str, float] = defaultdict(float)
    for s in stats:
        totals[op_family(s.op_type)] += s.total_us
    return dict(totals)


def family_share(stats: list[OpStat], exclude: tuple[str, ...] = ()) -> dict[str, float]:
    """Share (0..1) of summed op time per family, optionally leaving some families out."""
    totals = {f: t for f, t in family_time(stats).items() if f not in exclude}
    grand = sum(totals.values())
    return {f: (t / grand if grand else 0.0) for f, t in totals.items()}


def family_counts(tasks: list[Task]) -> Counter[str]:
    return family_counts_of_types(Counter(t.op_type for t in tasks))


def family_counts_of_types(type_counts: dict[str, int]) -> Counter[str]:
    """Task count per family from task counts per OP Type (what an engine's group-by gives)."""
    out: Counter[str] = Counter()
    for op_type, count in type_counts.items():
        out[op_family(op_type)] += count
    return out


def per_forward_counts(tasks: list[Task], forwards: int) -> dict[str, float]:
    """Task count per family divided by the number of profiled forwards."""
    return {f: c / forwards for f, c in family_counts(tasks).items()}


def top_ops(stats: list[OpStat], n: int = 10) -> list[OpStat]:
    return sorted(stats, key=lambda s: s.total_us, reverse=True)[:n]


def forward_shares(stats: list[OpStat]) -> dict[str, float]:
    """Family shares of forward-pass time: one-off init ops (weight init, random input) left out."""
    return family_share(stats, exclude=("init",))
