"""FLOPs, in one place: the formulas (multiply-adds x 2, from shapes) and the comparison made with them.

Three things are counted with these formulas:
- a model's forward, per op family: :mod:`common.collect.flop_count` runs it under torch's FLOP counter and
  adds, for the fused kernels torch has no formula for, :func:`mha_flops`, :func:`encoder_layer_flops` and
  :func:`rnn_flops`;
- a profile's ops, for the bounds table (:mod:`common.analyze.work_models`): :func:`sdpa_flops`, the same
  fused-kernel formulas, :func:`rnn_flops`;
- an ONNX graph's nodes, from the graph's own shapes (:func:`graph_flops`, mode 03), compared with the model's
  count by :func:`flops_verdict`.

Nothing here runs a model or reads a file: shapes come in, numbers go out. The shapes an ONNX graph only knows
once it runs are found by :func:`common.collect.flop_count.run_shapes` and passed in.
"""

from __future__ import annotations

import math
from collections import Counter

from common.analyze.families import op_family
from common.verdict import Verdict, not_applicable
from common.workload import FlopCount

# The families whose work is counted in FLOPs (multiply-adds x 2): what every tool that runs the model
# shares, however it names, fuses or decomposes the ops.
FLOP_FAMILIES = frozenset({"matmul", "attention", "conv", "recurrent"})


def uncounted_in(count: FlopCount, families: frozenset[str] | set[str]) -> list[str]:
    """The ops of ``families`` that ran without a formula (their family's total is then a lower bound)."""
    return sorted(op for op in count.uncounted if op_family(op) in families)


# --- formulas ------------------------------------------------------------------------------------
def matmul_flops(a: list[int], b: list[int]) -> int:
    """A (batched, broadcast) matrix product of shapes ``a`` and ``b``, 1-D operands as numpy takes them."""
    a, b = ([1, *a] if len(a) == 1 else list(a)), ([*b, 1] if len(b) == 1 else list(b))
    batch_a, batch_b = a[:-2], b[:-2]
    width = max(len(batch_a), len(batch_b))
    batch_a, batch_b = [1] * (width - len(batch_a)) + batch_a, [1] * (width - len(batch_b)) + batch_b
    return 2 * math.prod(max(x, y) for x, y in zip(batch_a, batch_b)) * a[-2] * a[-1] * b[-1]


def einsum_flops(equation: str, inputs: list[list[int]]) -> int:
    """A two-operand einsum: 2 x the product of every index's size (what its batched matmul computes); 0 for
    other equations."""
    terms = equation.replace(" ", "").split("->")[0].split(",")
    if len(terms) != 2 or "." in equation:
        return 0
    sizes = {}
    for term, shape in zip(terms, inputs):
        sizes.update(zip(term, shape))
    return 2 * math.prod(sizes.values())


def sdpa_flops(b: int, heads: int, s_q: int, s_k: int, d_q: int, d_v: int, backward: bool = False) -> float:
    """torch's sdpa_flop_count (forward: Q K^T and P V) and sdpa_backward_flop_count (five matmuls)."""
    per = 2.0 * b * heads * s_q * s_k
    return per * (3 * d_q + 2 * d_v) if backward else per * (d_q + d_v)


def mha_flops(b: int, l_q: int, l_k: int, e: int) -> float:
    """torch's fused multi-head attention (nn.MultiheadAttention's inference fast path), which torch's FLOP
    counter has no formula for: the q, k, v and output projections and the two attention products."""
    return 2.0 * b * e * e * (2 * l_q + 2 * l_k) + 4.0 * b * l_q * l_k * e


def encoder_layer_flops(src: tuple[int, ...], ffn_weight: tuple[int, int]) -> float:
    """torch's fused encoder layer (nn.TransformerEncoderLayer's inference fast path), ``src`` (B, L, E) or
    (L, E): self-attention as :func:`mha_flops`, then the feed-forward block's two matrix products."""
    tokens, length, e = math.prod(src[:-1]), src[-2], src[-1]
    return mha_flops(tokens // length, length, length, e) + 4.0 * tokens * ffn_weight[0] * ffn_weight[1]


def rnn_flops(rows: int, gate_rows: int, size_in: int, hidden: int, directions: int = 1) -> float:
    """One recurrent layer (LSTM, GRU, RNN): every time step's input and hidden projections into the gates, in
    every direction; ``rows``: time steps x batch, ``gate_rows``: gates x hidden. The gates' element-wise work
    is left out, as torch's counter leaves out a matmul's bias."""
    return 2.0 * rows * directions * gate_rows * (size_in + hidden)


# --- an ONNX graph, from its own shapes ----------------------------------------------------------
FLOP_OPS = ("MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum", "LSTM", "GRU", "RNN")
# Family groups compared by FLOPs: an exporter writes attention as MatMuls and a Softmax, and a recurrent
# layer is a matrix product per time step (torch runs a GRU as such, an LSTM as one fused op; the graph
# holds one GRU / LSTM node), so these are one group; a convolution stays a convolution.
FLOP_GROUPS = {"matrix products": frozenset({"matmul", "attention", "recurrent"}), "convolutions": frozenset({"conv"})}
# Both sides count multiply-adds x 2 from the same shapes, so they agree exactly when the graph computes
# what the model computes; 1% leaves room for a product the exporter computed ahead of time on weights.
FLOPS_RTOL = 0.01
COMPUTE_CHECK = "the exported graph computes what the model computes (03, FLOPs per family group)"


def graph_shapes(model) -> dict[str, list[int]]:
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


def _counted_nodes(model) -> list:
    groups = set().union(*FLOP_GROUPS.values())
    return [n for n in model.graph.node if op_family(n.op_type) in groups]


def shapes_to_run(model, shapes: dict[str, list[int]]) -> list[str]:
    """The tensors whose shapes a counted node needs and the graph does not hold statically (``shapes``:
    :func:`graph_shapes`; a Pad whose widths come out of ConstantOfShape and Concat): what
    :func:`common.collect.flop_count.run_shapes` finds."""
    wanted = [
        n.input[:3] + (list(n.output[:1]) if n.op_type == "Conv" else [])
        for n in _counted_nodes(model)
        if n.op_type in FLOP_OPS
    ]
    return sorted({name for names in wanted for name in names if name and name not in shapes})


def node_flops(node, shapes: dict[str, list[int]]) -> float | None:
    """FLOPs of one node from its shapes (None: a shape is not static; see FLOP_OPS for the formulas).
    Products only, as torch's counter counts them: biases, activations and gate arithmetic are left out."""
    ins = [shapes.get(name) for name in node.input if name]
    attrs = {a.name: a for a in node.attribute}
    if any(shape is None for shape in ins[:2]):
        return None
    if node.op_type == "MatMul":
        return matmul_flops(ins[0], ins[1])
    if node.op_type == "Gemm":
        a, b = ins[0], ins[1]
        m, k = (a[1], a[0]) if attrs.get("transA") and attrs["transA"].i else (a[0], a[1])
        n = b[0] if attrs.get("transB") and attrs["transB"].i else b[1]
        return 2 * m * k * n
    if node.op_type == "Conv":
        out = shapes.get(node.output[0])
        return None if out is None else 2 * out[0] * math.prod(out[2:]) * math.prod(ins[1])
    if node.op_type == "ConvTranspose":
        return 2 * ins[0][0] * math.prod(ins[0][2:]) * math.prod(ins[1])
    if node.op_type == "Einsum" and "equation" in attrs:
        return einsum_flops(attrs["equation"].s.decode(), ins)
    if node.op_type in ("LSTM", "GRU", "RNN") and len(ins) >= 3 and ins[2] is not None:
        # X [seq, batch, input] (either layout), W [directions, gates x hidden, input], R [.., .., hidden]
        x, w, r = ins[0], ins[1], ins[2]
        return rnn_flops(x[0] * x[1], w[1], w[2], r[2], directions=w[0])
    return None


def graph_flops(model, shapes: dict[str, list[int]] | None = None) -> tuple[dict[str, int], dict[str, int]]:
    """FLOPs per family of an ONNX model's nodes, from its shapes (``shapes``: :func:`graph_shapes`, with those of
    :func:`shapes_to_run` the graph computed when it ran added; None: the static ones, found here); and the nodes of
    a FLOP family that cannot be counted, by why: ``ConvInteger (no formula here)``, ``Gemm (shapes known only at run
    time)``."""
    shapes = graph_shapes(model) if shapes is None else shapes
    flops: Counter[str] = Counter()
    unknown: Counter[str] = Counter()
    for node in _counted_nodes(model):
        n = node_flops(node, shapes) if node.op_type in FLOP_OPS else None
        if n is None:
            why = "shapes known only at run time" if node.op_type in FLOP_OPS else "no formula here"
            unknown[f"{node.op_type} ({why})"] += 1
        else:
            flops[op_family(node.op_type)] += int(n)
    return dict(flops), dict(unknown)


# --- the exported graph against the model --------------------------------------------------------
def flops_not_counted(why: str) -> Verdict:
    """The comparison cannot be made: the model's FLOPs could not be counted (``why``: the counter's error)."""
    return not_applicable(COMPUTE_CHECK, f"not applicable: the model's FLOPs could not be counted ({why})"[:300])


def flops_verdict(model_flops: FlopCount, graph: dict[str, int], unknown: dict[str, int]) -> Verdict:
    """The exported graph computes what the model computes: FLOPs per family group within FLOPS_RTOL, the graph's
    from :func:`graph_flops` (its FLOPs per family and its uncountable nodes)."""
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
        return not_applicable(COMPUTE_CHECK, f"not applicable: {reason}")
    return Verdict(COMPUTE_CHECK, ok, "; ".join(parts + skipped))
