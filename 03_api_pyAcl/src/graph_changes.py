"""What the exporter and the offline converter changed in the model's graph, named, and the op-count check.

Three graphs of one model are compared by op type: the model as PyTorch runs it (one forward's
aten ops, ``common.workload.count_ops``), the exported ONNX graph, and the built graph of a
variant (ONNX Runtime's optimized file, or ATC's om dumped to JSON). Each difference is named:
a rule below when one matches (``Conv+Relu -> FusedConv x2``), otherwise listed as it is
(``removed Shape x2``), so no count changes silently.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from common.analyze.checks import Verdict, not_applicable
from common.analyze.families import op_family
from common.workload import BACKEND_DEPENDENT_FAMILIES, OpCounts

# Graph plumbing, not work: no kernel runs for these; they are left out of every count.
NON_COMPUTE_OPS = frozenset({"Constant", "Data", "NetOutput", "Const"})

# ONNX Runtime's graph transformers, as type patterns: (name, consumed types, produced types).
# Matched greedily, in this order, on what the optimization removed and added.
ORT_RULES: list[tuple[str, dict[str, int], dict[str, int]]] = [
    ("GELU's Erf formula + bias Add -> BiasGelu", {"Div": 1, "Erf": 1, "Add": 2, "Mul": 2}, {"BiasGelu": 1}),
    ("GELU's Erf formula (Div, Erf, Add, Mul, Mul) -> Gelu", {"Div": 1, "Erf": 1, "Add": 1, "Mul": 2}, {"Gelu": 1}),
    ("Add+Gelu -> BiasGelu", {"Add": 1, "Gelu": 1}, {"BiasGelu": 1}),
    ("LayerNorm formula -> LayerNormalization",
     {"ReduceMean": 2, "Sub": 1, "Pow": 1, "Add": 1, "Sqrt": 1, "Div": 1}, {"LayerNormalization": 1}),
    ("Add+LayerNormalization -> SkipLayerNormalization", {"Add": 1, "LayerNormalization": 1},
     {"SkipLayerNormalization": 1}),
    ("MatMul+Add -> Gemm", {"MatMul": 1, "Add": 1}, {"Gemm": 1}),
    ("MatMul+scale (Mul) -> FusedMatMul", {"MatMul": 1, "Mul": 1}, {"FusedMatMul": 1}),
    ("MatMul+scale (Div) -> FusedMatMul", {"MatMul": 1, "Div": 1}, {"FusedMatMul": 1}),
    ("Transpose+MatMul -> FusedMatMul", {"MatMul": 1, "Transpose": 1}, {"FusedMatMul": 1}),
    ("BatchNormalization folded into Conv", {"BatchNormalization": 1}, {}),
    ("Softmax written as its formula (ReduceMax, Sub, Exp, ReduceSum, Div)", {"Softmax": 1},
     {"ReduceMax": 1, "Sub": 1, "Exp": 1, "ReduceSum": 1, "Div": 1}),
    ("Gather -> Split", {"Gather": 1}, {"Split": 1}),
]
# Families an exported attention op spreads over when the exporter writes it as MatMul/Softmax/...
ATTENTION_SPREAD = frozenset({"attention", "matmul", "softmax", "elementwise"})


@dataclass(frozen=True)
class Change:
    """One named difference between two graphs of the model."""

    stage: str  # "exporter", "onnxruntime" or "atc"
    what: str
    count: int
    delta: dict[str, int]  # exact change of op counts per family (all occurrences together)
    loose: frozenset[str] = field(default_factory=frozenset)  # families changed by an amount no rule predicts

    def __str__(self) -> str:  # the left-overs ("removed Shape x2") carry their counts in their text
        return self.what if self.what.startswith(("removed ", "added ")) else f"{self.what} x{self.count}"


def type_counts(types) -> Counter[str]:
    return Counter(t for t in types if t not in NON_COMPUTE_OPS)


def _families(types: Counter[str]) -> Counter[str]:
    out: Counter[str] = Counter()
    for name, n in types.items():
        out[op_family(name)] += n
    return out


def _expected(per_family: dict[str, int], changes: list[Change]) -> Counter[str]:
    """Ops per family the model's counts come to once the named changes are applied."""
    expected: Counter[str] = Counter(per_family)
    for change in changes:
        expected.update(change.delta)
    return expected


def _delta(removed: Counter[str], added: Counter[str]) -> dict[str, int]:
    delta = _families(added)
    delta.subtract(_families(removed))
    return {f: n for f, n in delta.items() if n}


# ----- torch -> ONNX ---------------------------------------------------------------------------------
def _bias_adds(graph) -> int:
    """MatMul nodes whose output goes straight into an Add with a weight: a Linear on a >2-D input."""
    weights = {i.name for i in graph.initializer} | {o for n in graph.node if n.op_type == "Constant" for o in n.output}
    matmul_out = {n.output[0] for n in graph.node if n.op_type == "MatMul"}
    return sum(1 for n in graph.node if n.op_type == "Add" and len(n.input) == 2
               and ({n.input[0], n.input[1]} & matmul_out) and ({n.input[0], n.input[1]} & weights))


def export_changes(model: OpCounts, graph) -> list[Change]:
    """What the exporter wrote differently from the aten ops the model runs (``graph``: the exported GraphProto)."""
    exported = type_counts(n.op_type for n in graph.node)
    changes = []
    batch_norms = sum(n for op, n in model.per_op.items() if "batch_norm" in op) - exported["BatchNormalization"]
    if batch_norms > 0 and exported["Conv"]:  # eval mode: the exporter folds BN's scale and shift into Conv weights
        changes.append(Change("exporter", "BatchNormalization folded into Conv", batch_norms,
                              {op_family("BatchNormalization"): -batch_norms}))
    gelus = model.per_op.get("aten::gelu", 0) - exported["Gelu"]
    if gelus > 0 and exported["Erf"] >= gelus:
        formula = Counter({"Div": gelus, "Erf": gelus, "Add": gelus, "Mul": 2 * gelus})
        changes.append(Change("exporter", "GELU written as its Erf formula (Div, Erf, Add, Mul, Mul)", gelus,
                              _delta(Counter({"aten::gelu": gelus}), formula)))
    biases = _bias_adds(graph)
    if biases:
        changes.append(Change("exporter", "Linear on a >2-D input written as MatMul + Add (bias)", biases,
                              {op_family("Add"): biases}))
    attention = model.per_family.get("attention", 0) - _families(exported)["attention"]
    if attention > 0:
        changes.append(Change("exporter", "attention written as MatMul, Softmax and elementwise ops", attention,
                              {}, ATTENTION_SPREAD))
    return changes + _export_extras(model, exported, changes)


def _export_extras(model: OpCounts, exported: Counter[str], changes: list[Change]) -> list[Change]:
    """Families the exported graph holds more ops of than the model runs, with the rules above applied:
    the exporter's own decompositions (SiLU as Sigmoid + Mul ...), named by the op types it wrote.

    Only surplus is named: ops the graph lacks stay unexplained, so the check can still tell a model
    op that did not run. Runtime fusions of these ops then count against them, not against the model.
    """
    expected = _expected(model.per_family, changes)
    loose = {f for c in changes for f in c.loose}
    surplus = {f: n - expected[f] for f, n in _families(exported).items()
               if n > expected[f] and f not in loose and f not in BACKEND_DEPENDENT_FAMILIES}
    if not surplus:
        return []
    listed = "; ".join(f"{f} +{n} ({', '.join(sorted(t for t in exported if op_family(t) == f))})"
                       for f, n in sorted(surplus.items()))
    return [Change("exporter", f"added beyond the model's ops: {listed}", 1, surplus)]


# ----- ONNX -> built graph ------------------------------------------------------------------------------
def build_changes(exported: Counter[str], built: Counter[str], stage: str,
                  fused_conv_activations: Counter[str] | None = None) -> list[Change]:
    """What the converter changed: ``exported`` and ``built`` are op types counted per graph."""
    removed, added = exported - built, built - exported
    changes = []
    for activation, n in (fused_conv_activations or Counter()).items():  # FusedConv's activation attribute
        n = min(n, removed["Conv"], removed[activation], added["FusedConv"])
        if n:
            changes.append(_apply(stage, f"Conv+{activation} -> FusedConv", n, Counter(Conv=1, **{activation: 1}),
                                  Counter(FusedConv=1), removed, added))
    for what, consumed, produced in ORT_RULES if stage == "onnxruntime" else []:
        n = min([removed[t] // k for t, k in consumed.items()] + [added[t] // k for t, k in produced.items()])
        if what.startswith("BatchNormalization") and not built["Conv"] + built["FusedConv"]:
            n = 0
        if n:
            changes.append(_apply(stage, what, n, Counter(consumed), Counter(produced), removed, added))
    if added["Cast"]:
        changes.append(_apply(stage, "Cast inserted (precision)", added["Cast"], Counter(), Counter(Cast=1),
                              removed, added))
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


# ----- the check ---------------------------------------------------------------------------------------
def model_count_verdict(model: OpCounts, per_execute: Counter[str], changes: list[Change], where: str) -> Verdict:
    """Per family, the ops run per execute are the model's own, give or take the named changes.

    ``per_execute``: op types per execute as measured. Families whose counts depend on the
    backend (casts, layout, copies, set-up) are left out, as everywhere in the lab. Fewer ops of
    a family than the model runs, unexplained, fail: something the model does did not run; up to
    the model's ops on weights and buffers only (``OpCounts.constant``) may be missing, computed
    ahead of time by the exporter. More ops, unexplained, are reported, not failed: the runtime
    decomposes ops in ways no rule list covers, and the graph-count check already holds the
    runtime to the graph it was given.
    """
    expected = _expected(model.checked, changes)
    got = Counter({f: n for f, n in _families(per_execute).items() if f not in BACKEND_DEPENDENT_FAMILIES})
    parts, ok, extra = [], True, False
    for family in sorted(set(model.checked) | set(got) | {f for f, n in expected.items() if n}):
        if family in BACKEND_DEPENDENT_FAMILIES:
            continue
        own, want, have = model.checked.get(family, 0), expected[family], got[family]
        loose = [c for c in changes if family in c.loose]
        folded = model.constant.get(family, 0)
        if have == want:
            note = "" if want == own else f", {want - own:+d} by the changes named"
        elif loose:
            note = f", changed by: {loose[0].what}"
        elif have > want:
            note, extra = f", want {want}: more, not explained by a named change", True
        elif want - have <= folded:
            note = (f", want {want}: {want - have:g} computed ahead of time by the exporter (the model runs {folded} "
                    "on weights and buffers only)")
        else:
            note, ok = f", want {want}: not explained by a named change", False
        parts.append(f"{family} {have:g} (model {own}{note})")
    name = f"op counts per execute follow the model ({where})"
    if ok and extra:
        return not_applicable(name, "not decided: the exporter or the runtime decomposed ops without a rule here "
                                    "(the graph-count check holds the runtime to its graph): " + ", ".join(parts))
    return Verdict(name, ok, ", ".join(parts))
