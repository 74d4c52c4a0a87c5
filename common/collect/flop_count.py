"""FLOPs found by running: a model's forward under torch's FLOP counter, an ONNX graph's run-time shapes.

The formulas are :mod:`common.analyze.flops`'s; what needs the model or the graph to run is here: torch is
imported only when a count is asked for, ONNX Runtime only when a graph's shapes are.
"""

from __future__ import annotations

from collections import Counter

from common.analyze.families import op_family
from common.analyze.flops import FLOP_FAMILIES, encoder_layer_flops, mha_flops, rnn_flops
from common.workload import FlopCount


def _mha(query, key, value, embed_dim, *_) -> float:
    return mha_flops(query.shape[0], query.shape[1], key.shape[1], query.shape[2])


def _encoder_layer(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu, *rest) -> float:
    ffn_weight_1 = rest[6]  # after norm_first, eps and the two norms' weights and biases
    return encoder_layer_flops(tuple(src.shape), tuple(ffn_weight_1.shape))


def _rnn_layer(x, weight_ih, weight_hh, *_) -> float:
    return rnn_flops(x.numel() // x.shape[-1], weight_ih.shape[0], weight_ih.shape[1], weight_hh.shape[1])


def count_flops(model, inputs: tuple) -> FlopCount:
    """Run one no-grad forward and add up the FLOPs of every op torch's FLOP counter has a formula for
    (``torch.utils.flop_counter``: mm, addmm, bmm, baddbmm, convolution of every kind, the fused
    attention kernels). CPU's flash attention kernel is counted with the flash formula, torch's fused
    multi-head attention, encoder layer and LSTM layer (``aten::mkldnn_rnn_layer``) with
    :mod:`common.analyze.flops`' formulas; GRU and RNN layers run as matrix products the counter sees. An op of a
    FLOP family without a formula is listed in ``uncounted``."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    aliases = {
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: torch.ops.aten._scaled_dot_product_flash_attention
    }
    by_hand = {
        torch.ops.aten._native_multi_head_attention: _mha,
        torch.ops.aten._transformer_encoder_layer_fwd: _encoder_layer,
        torch.ops.aten.mkldnn_rnn_layer: _rnn_layer,
    }
    per_family: Counter[str] = Counter()
    uncounted: Counter[str] = Counter()

    class _Flops(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            packet = func.overloadpacket
            formula = flop_registry.get(aliases.get(packet, packet))
            name = f"{func.namespace}::{packet.__name__}"
            family = op_family(name)
            try:
                if formula is not None:
                    per_family[family] += formula(*args, **kwargs, out_val=out)
                elif packet in by_hand:
                    per_family[family] += by_hand[packet](*args)
                elif family in FLOP_FAMILIES:
                    uncounted[name] += 1
            except (TypeError, ValueError, IndexError, AttributeError):  # arguments a formula does not expect
                uncounted[name] += 1
            return out

    with torch.no_grad(), _Flops():
        model(*inputs)
    return FlopCount({f: float(n) for f, n in per_family.items()}, dict(uncounted))


def run_shapes(model, names: list[str], feeds: dict) -> dict[str, list[int]]:
    """The shapes of tensors ``names`` when the ONNX graph runs on ``feeds``: ONNX Runtime, optimizations off,
    the tensors asked for as outputs (:func:`common.analyze.flops.shapes_to_run` names them). Empty without ONNX
    Runtime, or for a graph it cannot run: the shapes stay unknown, and the FLOPs verdict says so."""
    if not names:
        return {}
    try:
        import onnxruntime as ort
    except ImportError:  # the npu group does not install it
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
    except Exception:  # noqa: BLE001 (a graph ORT cannot run)
        return {}
    return {n: list(v.shape) for n, v in zip(names, values)}
