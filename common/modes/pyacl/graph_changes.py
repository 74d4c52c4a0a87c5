"""What 03 compares its graphs with: the model's compute content, and the converter's changes, named.

Two comparisons, each against what the tool itself was given:
- the exported ONNX graph against the model, by *compute content*: FLOPs per family group, the
  graph's from its own shapes, the model's from torch's FLOP counter. Never op by op: an exporter
  writes a GELU as five ops, folds a BatchNorm into a convolution, unrolls attention into MatMuls;
- the built graph of a variant (ONNX Runtime's optimized file, or ATC's om dumped to JSON) against
  the exported graph, by op type: each difference is named by a rule below when one matches
  (``Conv+Relu -> FusedConv x2``), otherwise listed as it is (``removed Shape x2``). What runs is
  then counted against that built graph (variant_report.graph_count_verdict).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from common.analyze.families import op_family
from common.verdict import Verdict, not_applicable
from common.analyze.flops import FlopCount, uncounted_in

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


# ----- torch -> ONNX: the same computation ------------------------------------------------------------
# Family groups compared by FLOPs: an exporter writes attention as MatMuls and a Softmax, and a recurrent
# layer is a matrix product per time step (torch runs a GRU as such, an LSTM as one fused op; the graph
# holds one GRU / LSTM node), so these are one group; a convolution stays a convolution.
FLOP_GROUPS = {"matrix products": frozenset({"matmul", "attention", "recurrent"}), "convolutions": frozenset({"conv"})}
# Both sides count multiply-adds x 2 from the same shapes, so they agree exactly when the graph computes
# what the model computes; 1% leaves room for a product the exporter computed ahead of time on weights.
FLOPS_RTOL = 0.01
COMPUTE_CHECK = "the exported graph computes what the model computes (03, FLOPs per family group)"


def _shapes(model) -> dict[str, list[int]]:
    """Every tensor's static shape in an ONNX model (ONNX's shape inference; initializers and Constants)."""
    import onnx

    try:  # data_prop: shapes computed in the graph (Shape -> Gather -> Concat -> Reshape) are followed too
        graph = onnx.shape_inference.infer_shapes(model, data_prop=True).graph
    except Exception:  # noqa: BLE001 (shape inference refuses some graphs: their shapes stay unknown)
        graph = model.graph
    shapes: dict[str, list[int]] = {}
    for info in [*graph.input, *graph.output, *graph.value_info]:
        dims = info.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            shapes[info.name] = [d.dim_value for d in dims]
    shapes.update({t.name: list(t.dims) for t in graph.initializer})
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            shapes[node.output[0]] = list(node.attribute[0].t.dims)
    return shapes


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def _matmul_flops(a: list[int], b: list[int]) -> int:
    a, b = ([1, *a] if len(a) == 1 else a), ([*b, 1] if len(b) == 1 else b)
    batch_a, batch_b = a[:-2], b[:-2]
    width = max(len(batch_a), len(batch_b))
    batch_a, batch_b = [1] * (width - len(batch_a)) + batch_a, [1] * (width - len(batch_b)) + batch_b
    return 2 * _prod(max(x, y) for x, y in zip(batch_a, batch_b)) * a[-2] * a[-1] * b[-1]


def _einsum_flops(equation: str, inputs: list[list[int]]) -> int:
    """A two-operand einsum: 2 x the product of every index's size (what its batched matmul computes)."""
    terms = equation.replace(" ", "").split("->")[0].split(",")
    if len(terms) != 2 or "." in equation:
        return 0
    sizes = {}
    for term, shape in zip(terms, inputs):
        sizes.update(zip(term, shape))
    return 2 * _prod(sizes.values())


FLOP_OPS = ("MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum", "LSTM", "GRU", "RNN")


def _node_flops(node, shapes: dict[str, list[int]]) -> int | None:
    """FLOPs of one node from its shapes (None: a shape is not static; see FLOP_OPS for the formulas).
    Products only, as torch's counter counts them: biases, activations and gate arithmetic are left out."""
    ins = [shapes.get(name) for name in node.input if name]
    attrs = {a.name: a for a in node.attribute}
    if any(shape is None for shape in ins[:2]):
        return None
    if node.op_type == "MatMul":
        return _matmul_flops(ins[0], ins[1])
    if node.op_type == "Gemm":
        a, b = ins[0], ins[1]
        m, k = (a[1], a[0]) if attrs.get("transA") and attrs["transA"].i else (a[0], a[1])
        n = b[0] if attrs.get("transB") and attrs["transB"].i else b[1]
        return 2 * m * k * n
    if node.op_type == "Conv":
        out = shapes.get(node.output[0])
        return None if out is None else 2 * out[0] * _prod(out[2:]) * _prod(ins[1])
    if node.op_type == "ConvTranspose":
        return 2 * ins[0][0] * _prod(ins[0][2:]) * _prod(ins[1])
    if node.op_type == "Einsum" and "equation" in attrs:
        return _einsum_flops(attrs["equation"].s.decode(), ins)
    if node.op_type in ("LSTM", "GRU", "RNN") and len(ins) >= 3 and ins[2] is not None:
        # X [seq, batch, input] (either layout), W [directions, gates x hidden, input], R [.., .., hidden]:
        # every time step's input and hidden projections, in every direction
        x, w, r = ins[0], ins[1], ins[2]
        return 2 * x[0] * x[1] * w[0] * w[1] * (w[2] + r[2])
    return None


def _run_shapes(model, names: list[str], feeds: dict) -> dict[str, list[int]]:
    """The shapes of tensors ``names`` when the graph runs on ``feeds``: ONNX Runtime, optimizations off,
    the tensors asked for as outputs. For shapes the graph computes from values shape inference does not
    follow (a Pad whose widths come out of ConstantOfShape and Concat). Empty without ONNX Runtime."""
    try:
        import onnxruntime as ort
    except ImportError:  # the npu group does not install it: the shapes stay unknown, and the verdict says so
        return {}
    import onnx

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    known = {o.name for o in probe.graph.output}
    probe.graph.output.extend([onnx.ValueInfoProto(name=n) for n in names if n not in known])
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    try:
        session = ort.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
        values = session.run(names, feeds)
    except Exception:  # noqa: BLE001 (a graph ORT cannot run: the shapes stay unknown, and the verdict says so)
        return {}
    return {n: list(v.shape) for n, v in zip(names, values)}


def graph_flops(model, feeds: dict | None = None) -> tuple[dict[str, int], dict[str, int]]:
    """FLOPs per family of an ONNX model's nodes, from its own shapes (with ``feeds``, the graph's inputs,
    shapes computed at run time too); and the nodes of a FLOP family that cannot be counted, by why:
    ``ConvInteger (no formula here)``, ``Gemm (shapes known only at run time)``."""
    shapes = _shapes(model)
    groups = set().union(*FLOP_GROUPS.values())
    wanted = [
        n.input[:3] + (list(n.output[:1]) if n.op_type == "Conv" else [])
        for n in model.graph.node
        if n.op_type in FLOP_OPS and op_family(n.op_type) in groups
    ]
    missing = sorted({name for names in wanted for name in names if name and name not in shapes})
    if missing and feeds:
        shapes.update(_run_shapes(model, missing, feeds))
    flops: Counter[str] = Counter()
    unknown: Counter[str] = Counter()
    for node in model.graph.node:
        family = op_family(node.op_type)
        if family not in groups:
            continue
        n = _node_flops(node, shapes) if node.op_type in FLOP_OPS else None
        if n is None:
            why = "shapes known only at run time" if node.op_type in FLOP_OPS else "no formula here"
            unknown[f"{node.op_type} ({why})"] += 1
        else:
            flops[family] += n
    return dict(flops), dict(unknown)


def compute_verdict(model_flops: FlopCount, onnx_model, feeds: dict | None = None) -> Verdict:
    """The exported graph computes what the model computes: FLOPs per group within FLOPS_RTOL (``feeds``: the
    graph's inputs, for shapes it computes at run time)."""
    return flops_verdict(model_flops, *graph_flops(onnx_model, feeds))


def flops_verdict(model_flops: FlopCount, graph: dict[str, int], unknown: dict[str, int]) -> Verdict:
    """:func:`compute_verdict` on the graph's FLOPs per family and its uncountable nodes (:func:`graph_flops`)."""
    name = COMPUTE_CHECK
    parts, skipped, ok = [], [], True
    for group, families in FLOP_GROUPS.items():
        want = sum(model_flops.per_family.get(f, 0.0) for f in families)
        got = sum(graph.get(f, 0) for f in families)
        no_formula = uncounted_in(model_flops, families)
        unknown_here = sorted(t for t in unknown if op_family(t.split(" (")[0]) in families)
        if no_formula or unknown_here:
            missing = [f"torch's FLOP counter has no formula for {', '.join(no_formula)}"] if no_formula else []
            missing += [f"the graph's {', '.join(unknown_here)}"] if unknown_here else []
            skipped.append(f"{group}: not compared ({'; '.join(missing)})")
            continue
        if not want and not got:
            continue
        rel = abs(got - want) / max(want, got)
        ok &= rel <= FLOPS_RTOL
        verdict = "" if rel <= FLOPS_RTOL else " — the graph computes something else than the model"
        parts.append(
            f"{group}: model {want:.4g}, graph {got:.4g} FLOP per forward (off by {100 * rel:.2f}%, "
            f"tolerance {100 * FLOPS_RTOL:g}%){verdict}"
        )
    if not parts:
        reason = "; ".join(skipped) or "neither the model nor the graph has matrix products, convolutions or RNNs"
        return not_applicable(name, f"not applicable: {reason}")
    return Verdict(name, ok, "; ".join(parts + skipped))


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
