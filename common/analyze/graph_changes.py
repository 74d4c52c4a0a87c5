"""What 03 compares its graphs with: the converter's changes, named.

The built graph of a variant (ONNX Runtime's optimized file, or ATC's om dumped to JSON) against the exported
graph, by op type: each difference is named by a rule below when one matches (``Conv+Relu -> FusedConv x2``),
otherwise listed as it is (``removed Shape x2``). What runs is then counted against that built graph
(common.analyze.checks.check_graph_counts). The exported graph against the model is compared by FLOPs, in
:mod:`common.analyze.flops`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from common.analyze.families import op_family

# Graph plumbing, not work: no kernel runs for these; they are left out of every count.
NON_COMPUTE_OPS = frozenset({"Constant", "Data", "NetOutput", "Const"})

# ONNX Runtime's graph transformers, as type patterns: (name, consumed types, produced types).
# Matched greedily, in this order, on what the optimization removed and added.
ORT_RULES: list[tuple[str, dict[str, int], dict[str, int]]] = [
    ("GELU's Erf formula + bias Add -> BiasGelu", {"Div": 1, "Erf": 1, "Add": 2, "Mul": 2}, {"BiasGelu": 1}),
    ("GELU's Erf formula (Div, Erf, Add, Mul, Mul) -> Gelu", {"Div": 1, "Erf": 1, "Add": 1, "Mul": 2}, {"Gelu": 1}),
    ("Add+Gelu -> BiasGelu", {"Add": 1, "Gelu": 1}, {"BiasGelu": 1}),
    (
        "LayerNorm formula -> LayerNormalization",
        {"ReduceMean": 2, "Sub": 1, "Pow": 1, "Add": 1, "Sqrt": 1, "Div": 1},
        {"LayerNormalization": 1},
    ),
    (
        "Add+LayerNormalization -> SkipLayerNormalization",
        {"Add": 1, "LayerNormalization": 1},
        {"SkipLayerNormalization": 1},
    ),
    ("MatMul+Add -> Gemm", {"MatMul": 1, "Add": 1}, {"Gemm": 1}),
    ("MatMul+scale (Mul) -> FusedMatMul", {"MatMul": 1, "Mul": 1}, {"FusedMatMul": 1}),
    ("MatMul+scale (Div) -> FusedMatMul", {"MatMul": 1, "Div": 1}, {"FusedMatMul": 1}),
    ("Transpose+MatMul -> FusedMatMul", {"MatMul": 1, "Transpose": 1}, {"FusedMatMul": 1}),
    ("BatchNormalization folded into Conv", {"BatchNormalization": 1}, {}),
    (
        "Softmax written as its formula (ReduceMax, Sub, Exp, ReduceSum, Div)",
        {"Softmax": 1},
        {"ReduceMax": 1, "Sub": 1, "Exp": 1, "ReduceSum": 1, "Div": 1},
    ),
    ("Gather -> Split", {"Gather": 1}, {"Split": 1}),
]


@dataclass(frozen=True)
class Change:
    """One named difference between two graphs of the model."""

    stage: str  # "exporter", "onnxruntime" or "atc"
    what: str
    count: int
    delta: dict[str, int]  # exact change of op counts per family (all occurrences together)

    def __str__(self) -> str:  # the left-overs ("removed Shape x2") carry their counts in their text
        return self.what if self.what.startswith(("removed ", "added ")) else f"{self.what} x{self.count}"


def type_counts(types) -> Counter[str]:
    return Counter(t for t in types if t not in NON_COMPUTE_OPS)


def _families(types: Counter[str]) -> Counter[str]:
    out: Counter[str] = Counter()
    for name, n in types.items():
        out[op_family(name)] += n
    return out


def _delta(removed: Counter[str], added: Counter[str]) -> dict[str, int]:
    delta = _families(added)
    delta.subtract(_families(removed))
    return {f: n for f, n in delta.items() if n}


# ----- ONNX -> built graph ------------------------------------------------------------------------------
def build_changes(
    exported: Counter[str], built: Counter[str], stage: str, fused_conv_activations: Counter[str] | None = None
) -> list[Change]:
    """What the converter changed: ``exported`` and ``built`` are op types counted per graph."""
    removed, added = exported - built, built - exported
    changes = []
    for activation, n in (fused_conv_activations or Counter()).items():  # FusedConv's activation attribute
        n = min(n, removed["Conv"], removed[activation], added["FusedConv"])
        if n:
            changes.append(
                _apply(
                    stage,
                    f"Conv+{activation} -> FusedConv",
                    n,
                    Counter(Conv=1, **{activation: 1}),
                    Counter(FusedConv=1),
                    removed,
                    added,
                )
            )
    for what, consumed, produced in ORT_RULES if stage == "onnxruntime" else []:
        n = min([removed[t] // k for t, k in consumed.items()] + [added[t] // k for t, k in produced.items()])
        if what.startswith("BatchNormalization") and not built["Conv"] + built["FusedConv"]:
            n = 0
        if n:
            changes.append(_apply(stage, what, n, Counter(consumed), Counter(produced), removed, added))
    if added["Cast"]:
        changes.append(
            _apply(stage, "Cast inserted (precision)", added["Cast"], Counter(), Counter(Cast=1), removed, added)
        )
    if +removed:
        listed = ", ".join(f"{t} x{n}" for t, n in sorted((+removed).items()))
        changes.append(Change(stage, f"removed {listed}", 1, _delta(+removed, Counter())))
    if +added:
        listed = ", ".join(f"{t} x{n}" for t, n in sorted((+added).items()))
        changes.append(Change(stage, f"added {listed}", 1, _delta(Counter(), +added)))
    return changes


def _apply(stage, what, n, consumed: Counter, produced: Counter, removed: Counter, added: Counter) -> Change:
    consumed = Counter({t: k * n for t, k in consumed.items()})
    produced = Counter({t: k * n for t, k in produced.items()})
    removed.subtract(consumed)
    added.subtract(produced)
    return Change(stage, what, n, _delta(consumed, produced))


def describe(changes: list[Change]) -> str:
    """The fusions column: every change, ``; `` separated (``none`` when the graphs hold the same ops)."""
    return "; ".join(map(str, changes)) or "none"
