"""Work models for the ops that are not a matmul or element-wise: the FLOPs and bytes an op must at least do,
from the shapes a profile records (Input / Output Shapes, as msprof, torch_npu and the portable backend write them).

Bytes: every tensor input read once and every output written once (what must cross memory when nothing is
cached); FLOPs: the formula below, per family. Sources:

- convolution (of every kind: transposed, depthwise/grouped, 1d/2d/3d, the NPU's backprop ops):
  ``torch.utils.flop_counter.conv_flop_count``: 2 x batch x output positions (input positions when
  transposed) x every weight element. Re-written here over shape tuples because reports run where torch
  may be absent; tests/unit/test_work_models.py checks both give the same numbers.
- attention: ``torch.utils.flop_counter.sdpa_flop_count`` / ``sdpa_backward_flop_count`` (the two
  matmuls of attention, five for the gradient; a causal mask is not discounted, as torch does not).
  torch's fused multi-head attention and encoder layer have no formula in torch: the hand formulas of
  ``common.analyze.flops`` (projections + attention [+ feed-forward]), the ones the model's FLOP count uses.
- recurrent: by hand, because neither torch's FLOP counter nor the profiler's ``with_flops`` knows RNN
  ops: 2 x time steps x batch x weight-matrix elements (the gate matmuls, input and hidden); the gates'
  element-wise work is not counted, so the figure is a lower bound.
- norm: by hand (no library counts norms): FLOPs per element of the normalized tensor, at least
  :data:`NORM_FLOPS_PER_ELEMENT` (e.g. layer norm: a sum, a sum of squares, then x * scale + shift).
- embedding: a gather: no arithmetic; bytes are the indices and the rows they pick (read, then written),
  not the whole table.
- pooling and resizing: read the input and write the output; >= 1 FLOP per output element (the window
  size is an attribute no shape holds).

Each function returns a :class:`Work` or a short reason (a string) why the shapes do not say.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from common.analyze.flops import encoder_layer_flops, mha_flops, rnn_flops, sdpa_flops


@dataclass(frozen=True)
class Work:
    """The work an op must do at minimum: floating-point operations and bytes to and from memory."""

    flops: float
    bytes: float
    how: str  # the formula, in words


Tensors = list[tuple[tuple[int, ...], int]]  # (shape, bytes per element) of each tensor


def _numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def _bytes(*groups: Tensors) -> float:
    return float(sum(_numel(s) * b for group in groups for s, b in group))


def tensors(shapes: list[tuple[int, ...]] | None, sizes: list[int] | None) -> Tensors:
    """The tensors among the arguments (non-tensors have 0 bytes per element); outputs without dtypes: 4 bytes."""
    if not shapes:
        return []
    sizes = sizes or [4] * len(shapes)
    return [(s, b) for s, b in zip(shapes, sizes) if b]


def _key(op_type: str) -> str:
    """aten::mkldnn_rnn_layer -> mkldnnrnnlayer; Conv2DBackpropInput -> conv2dbackpropinput."""
    return op_type.lower().removeprefix("aten::").replace("_", "")


# --- convolution ---------------------------------------------------------------------------------
def conv_work(op_type: str, ins: Tensors, outs: Tensors) -> Work | str:
    """2 x (positions x channels of the side the weight's first dimension maps to) x (weight elements per
    such channel): torch's conv_flop_count, whatever the layout (ND, or the NPU's 5HD with a FRACTAL_Z weight)."""
    key = _key(op_type)
    big = [t for t in ins if len(t[0]) >= 3]  # activations and weights; not the NPU's input_size vectors
    if "backpropfilter" in key or "backwardweight" in key:  # dW = x (*) dy: the weight is the output
        if len(big) < 2 or not outs:
            return "conv gradient: dy or dW missing from the shapes"
        sides, w, what = [big[-1]], outs[0], "dy"
    elif "backpropinput" in key or "backwardinput" in key:  # dX = dy (*) W^T: (input_size,) filter, dy
        if len(big) < 2:
            return "conv gradient: filter or dy missing from the shapes"
        sides, w, what = [big[1]], big[0], "dy"
    elif key.startswith("convolutionbackward"):  # aten: grad_output, input, weight: >= one of dX, dW
        if len(big) < 3:
            return "conv gradient: grad_output, input or weight missing"
        sides, w, what = [big[0]], big[2], "dy (one of dX, dW counted)"
    elif "transpose" in key or "deconv" in key:  # x is on the weight's first-dimension side
        if len(big) < 2:
            return "weights folded into the op (an initializer): kernel unknown"
        sides, w, what = [big[0]], big[1], "input (transposed)"
    else:
        if len(big) < 2:
            return "weights folded into the op (an initializer): kernel unknown"
        x, w = big[0], big[1]
        if not outs:
            return "no Output Shapes: stride and padding unknown"
        # aten::_convolution / convolution run both directions: the side whose channels are the weight's
        # first dimension (the output normally, the input when transposed); both match: the smaller count
        sides, what = [outs[0], x], "output"
    (ws, _), rank = w, len(sides[0][0])
    # the NPU's 5HD activations (NC1HWC0, 6-D for 3-D convs) with a FRACTAL_Z weight (C1*kernel, N1, N0, C0):
    # channels padded to C0 / N0 count as the cube computes them
    fractal = len(ws) == 4 and rank in (5, 6)
    if not fractal and len(ws) != rank:
        return f"weight layout {','.join(map(str, ws))} not modelled"
    per_channel_out = ws[1] * ws[2] if fractal else ws[0]
    if fractal:
        sides = sides[:1]
    else:
        matching = [s for s in sides if s[0][1] == per_channel_out]
        if not matching:
            return f"shapes disagree: weight {ws} matches no side's channels"
        if len(matching) == 2:
            what = "output (input if transposed: the smaller)"
        sides = matching
    g = min(sides, key=lambda t: _numel(t[0]))
    each = _numel(ws) // per_channel_out
    return Work(
        2.0 * _numel(g[0]) * each,
        _bytes(ins, outs),
        f"conv (torch's conv_flop_count): 2 x {what} elements x {each} weights each"
        + (" (channels padded to C0)" if fractal else ""),
    )


# --- attention -----------------------------------------------------------------------------------
def attention_work(op_type: str, ins: Tensors, outs: Tensors) -> Work | str:
    key = _key(op_type)
    moved = _bytes(ins, outs)
    shapes = [s for s, _ in ins]
    if "nativemultiheadattention" in key:
        if len(shapes) < 3 or len(shapes[0]) != 3:
            return "fused MHA: query, key, value not 3-D"
        (b, l_q, e), l_k = shapes[0], shapes[1][-2]
        return Work(mha_flops(b, l_q, l_k, e), moved, "fused MHA (common.analyze.flops): projections + attention")
    if "transformerencoderlayer" in key:
        if len(shapes) < 10 or len(shapes[0]) not in (2, 3) or len(shapes[9]) != 2:
            return "fused encoder layer: src or feed-forward weight missing"
        return Work(
            encoder_layer_flops(shapes[0], shapes[9]),
            moved,
            "fused encoder layer (common.analyze.flops): attention + feed-forward matmuls",
        )
    backward = "grad" in key or "backward" in key
    qkv = [s for s in shapes if len(s) >= 3]
    if backward and op_type.lower().startswith("aten::"):
        qkv = qkv[1:]  # aten's attention backward ops take grad_out first; the NPU's FlashAttentionScoreGrad q
    if len(qkv) < 3:
        return "query, key, value not among the shapes"
    q, k, v = qkv[:3]
    if len(q) == 4 and len(k) == 4 and len(v) == 4:  # B, N, S, D: torch's layout (and the NPU's BNSD)
        b, n, s_q, d_q = q
        if k[0] != b or v[2] != k[2] or k[3] != d_q:
            return f"shapes disagree: q {q}, k {k}, v {v}"
        return Work(
            sdpa_flops(b, n, s_q, k[2], d_q, v[3], backward),
            moved,
            f"attention (torch's sdpa{'_backward' if backward else ''}_flop_count), dense",
        )
    if len(q) == 3 and len(k) == 3 and len(v) == 3:
        return _bsh_attention(q, k, v, shapes, [s for s, _ in outs], backward, moved)
    return f"attention layout {q} not modelled"


def _bsh_attention(q, k, v, ins, outs, backward, moved) -> Work | str:
    """The NPU's FlashAttentionScore(Grad) in BSH / SBH layout: the head count is an attribute, but the
    softmax statistics (B, N, S_q, 8) it writes (and its gradient reads) give B, N and S_q."""
    stats = [s for s in (ins + outs) if len(s) == 4 and s[-1] == 8]
    if not stats:
        return "BSH/SBH attention: head count is an attribute (no softmax stats shape)"
    b, n, s_q, _ = stats[0]
    if (q[0], q[1]) == (b, s_q):
        s_at = 1
    elif (q[0], q[1]) == (s_q, b):
        s_at = 0
    else:
        return f"shapes disagree: q {q} vs B={b}, S={s_q} of the softmax stats"
    d_q = q[2] // n
    heads_kv = k[2] // d_q if d_q else 0
    if q[2] % n or not heads_kv or k[2] % d_q or v[2] % heads_kv:
        return f"shapes disagree: hidden {q[2]} (q), {k[2]} (k), {v[2]} (v) over {n} heads"
    d_v = v[2] // heads_kv
    return Work(
        sdpa_flops(b, n, s_q, k[s_at], d_q, d_v, backward),
        moved,
        f"attention (torch's sdpa{'_backward' if backward else ''}_flop_count), dense, {n} heads from the "
        "softmax stats",
    )


# --- recurrent -----------------------------------------------------------------------------------
def recurrent_work(op_type: str, ins: Tensors, outs: Tensors) -> Work | str:
    """2 x steps x batch x (input-to-hidden + hidden-to-hidden weight elements) per layer and direction."""
    key = _key(op_type)
    moved = _bytes(ins, outs)
    shapes, out_shapes = [s for s, _ in ins], [s for s, _ in outs]
    gates = _gates(key)
    if not shapes or gates is None:
        return "recurrent op not recognised"
    x = shapes[0]
    if len(x) not in (2, 3) or not x[-1]:
        return f"input {x} is not (time, batch, features)"
    size_in, rows = x[-1], _numel(x) // x[-1]  # rows = time steps x batch, whatever their order
    how = "recurrent (by hand; no library counts RNNs): 2 x steps x batch x gate weights"
    found = _weights(shapes[1:], gates, size_in)
    if found:  # aten::mkldnn_rnn_layer, *_cell, CANN's DynamicRNN / DynamicGRUV2, ONNX LSTM/GRU/RNN with W, R
        mats, hidden = found
        written = 0 if outs else rows * hidden * ins[0][1]  # the output sequence, when not in the shapes
        return Work(2.0 * rows * sum(_numel(m) for m in mats), moved + written, how)
    # aten::gru / rnn_tanh / rnn_relu (input, hx [L*D, B, H], params[]): torch records no shapes for the
    # weights; the output [..., D*H] (Output Shapes) gives the directions D, then L = L*D / D
    if len(shapes) >= 2 and len(shapes[1]) == 3 and shapes[1][-1]:
        layers_dirs, _, hidden = shapes[1]
        options = [d for d in (1, 2) if layers_dirs % d == 0]
        if out_shapes and out_shapes[0] and out_shapes[0][-1] % hidden == 0:
            options = [out_shapes[0][-1] // hidden]

        def total(d: int) -> float:
            sizes = [size_in if layer == 0 else d * hidden for layer in range(layers_dirs // d)]
            return sum(rnn_flops(rows, gates * hidden, size, hidden, directions=d) for size in sizes)

        note = "" if len(options) == 1 else " (directions unknown: the smaller of 1 and 2)"
        return Work(min(total(d) for d in options), moved, how + note)
    # ONNX LSTM/GRU/RNN with W and R folded in (initializers): Y [T, D, B, H] gives D and H
    if out_shapes and len(out_shapes[0]) == 4:
        _, d, _, hidden = out_shapes[0]
        return Work(rnn_flops(rows, gates * hidden, size_in, hidden, directions=d), moved, how)
    return "recurrent weights not in the shapes (tensor lists have none)"


def _weights(shapes: list[tuple[int, ...]], gates: int, size_in: int) -> tuple[list, int] | None:
    """The gate weight matrices among the shapes and H: one with dimensions {G*H, I} (input to hidden) and
    one {G*H, H} (hidden to hidden), either order, [directions] in front (ONNX); or CANN's fused {G*H, I+H}.
    The largest H that fits wins (a state [B, H] can look like a small weight)."""
    mats = [s for s in shapes if len(s) in (2, 3)]
    best = None
    for m in mats:
        for gh, other in ((m[-2], m[-1]), (m[-1], m[-2])):
            if not gh or gh % gates:
                continue
            hidden = gh // gates
            if other == size_in + hidden:
                found = ([m], hidden)
            elif other == size_in:
                recurrent = [
                    r for r in mats if r is not m and sorted(r[-2:]) == sorted((gh, hidden)) and r[:-2] == m[:-2]
                ]
                if not recurrent:
                    continue
                found = ([m, recurrent[0]], hidden)
            else:
                continue
            if best is None or found[1] > best[1]:
                best = found
    return best


def _gates(key: str) -> int | None:
    if "gru" in key:
        return 3
    if "lstm" in key or key.startswith("dynamicrnn") or "mkldnnrnn" in key:
        return 4  # CANN's DynamicRNN is an LSTM; mkldnn_rnn_layer runs torch's LSTM on the CPU
    if "rnn" in key:
        return 1
    return None


# --- norm ----------------------------------------------------------------------------------------
NORM_FLOPS_PER_ELEMENT = {
    "rms": 3,  # square, add (sum of squares); x * rstd (a weight, when there is one, adds a multiply)
    "batch": 2,  # inference: x * scale + shift with per-channel scale and shift (training computes more)
    "bn": 2,
    "layer": 5,  # sum; square + add (sum of squares); x * scale + shift
    "group": 5,
    "instance": 5,
}


def norm_work(op_type: str, ins: Tensors, outs: Tensors) -> Work | str:
    key = _key(op_type)
    if not ins:
        return "no tensor among the shapes"
    x = max(ins, key=lambda t: _numel(t[0]))
    per = next((v for k, v in NORM_FLOPS_PER_ELEMENT.items() if k in key), 1)
    written = outs or [x]  # a norm writes a tensor the size of its input (and small statistics)
    return Work(
        float(per * _numel(x[0])),
        _bytes(ins, written),
        f"norm (by hand; no library counts norms): >= {per} FLOP per element of {x[0]}",
    )


# --- embedding -----------------------------------------------------------------------------------
def embedding_work(op_type: str, ins: Tensors, outs: Tensors) -> Work | str:
    """aten::embedding(weight, indices), embedding_bag(weight, indices, offsets ...): the rows the indices pick."""
    key = _key(op_type)
    if len(ins) < 2 or len(ins[0][0]) != 2:
        return "embedding: weight [V, D] and indices not in the shapes"
    (table, w_size), (idx, i_size) = ins[0], ins[1]
    dim, picked = table[1], _numel(idx)
    if "backward" in key or "grad" in key:  # grad [..., D] scattered (added) into the table's rows
        grad = max(ins, key=lambda t: _numel(t[0]))
        return Work(float(_numel(grad[0])), _bytes(ins, outs), "embedding gradient: one add per gradient element")
    rows = picked * dim * w_size
    if "bag" in key:
        bags = _numel(ins[2][0]) if len(ins) > 2 else 1
        out = _bytes(outs[:1]) if outs else max(bags - 1, 0) * dim * w_size
        flops = float(max(picked - bags, 0) * dim)
        return Work(
            flops,
            picked * i_size + rows + out + (_bytes(ins[2:3]) if len(ins) > 2 else 0),
            "embedding bag: read the picked rows, one add per row beyond the first of each bag",
        )
    return Work(0.0, float(picked * i_size + 2 * rows), "embedding: a gather, read and write the picked rows")


# --- pooling -------------------------------------------------------------------------------------
def pool_work(op_type: str, ins: Tensors, outs: Tensors) -> Work | str:
    """Pooling, and resizing (upsample, interpolate: the same reads and writes): the input read, the output
    written, >= 1 FLOP per output element."""
    what = "resize" if "pool" not in _key(op_type) else "pool"
    if not ins:
        return "no tensor among the shapes"
    if not outs:
        return Work(0.0, _bytes(ins), f"{what}: read the input (output size unknown: not counted)")
    return Work(
        float(_numel(outs[0][0])),
        _bytes(ins, outs),
        f"{what}: read the input, write the output, >= 1 FLOP per output element",
    )


MODELS = {
    "conv": conv_work,
    "attention": attention_work,
    "recurrent": recurrent_work,
    "norm": norm_work,
    "embedding": embedding_work,
    "pool": pool_work,
    "resize": pool_work,
}

# Why an op of another family has no model when its inputs differ in size (the element-wise model needs one size)
NO_MODEL = {
    "indexing": "indexing: bytes depend on the index values",
    "reduce": "reduce: inputs of different sizes",
    "optimizer": "optimizer step over a list of tensors",
    "communication": "a transfer between devices, not compute",
    "softmax": "softmax: inputs of different sizes",
    "other": "op of no known family",
}
