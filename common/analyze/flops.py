"""FLOPs of one forward of a model, per op family: torch's FLOP counter formulas, and by hand the fused
kernels it has no formula for. Mode 03 compares its graph's work with these, mode 04's sweep its points.

Counting runs the model once (no grad) under a dispatch mode that sees every aten op; torch is imported
only here, when a count is asked for.
"""

from __future__ import annotations

from collections import Counter

from common.analyze.families import op_family
from common.workload import FlopCount

__all__ = ["FLOP_FAMILIES", "FlopCount", "count_flops", "uncounted_in"]

# The families whose work is counted in FLOPs (multiply-adds x 2): what every tool that runs the model
# shares, however it names, fuses or decomposes the ops.
FLOP_FAMILIES = frozenset({"matmul", "attention", "conv", "recurrent"})


def uncounted_in(count: FlopCount, families: frozenset[str] | set[str]) -> list[str]:
    """The ops of ``families`` that ran without a formula (their family's total is then a lower bound)."""
    return sorted(op for op in count.uncounted if op_family(op) in families)


def _mha_flops(query, key, value, embed_dim, *_) -> int:
    """torch's fused multi-head attention (nn.MultiheadAttention's inference fast path), which torch's FLOP
    counter has no formula for: the q, k, v and output projections and the two attention products."""
    b, lq, e = query.shape
    lk = key.shape[1]
    return 2 * b * e * e * (2 * lq + 2 * lk) + 4 * b * lq * lk * e


def _encoder_layer_flops(
    src,
    embed_dim,
    num_heads,
    qkv_weight,
    qkv_bias,
    proj_weight,
    proj_bias,
    use_gelu,
    norm_first,
    eps,
    norm_weight_1,
    norm_bias_1,
    norm_weight_2,
    norm_bias_2,
    ffn_weight_1,
    *_,
) -> int:
    """torch's fused encoder layer (nn.TransformerEncoderLayer's inference fast path): self-attention as
    above, then the feed-forward block's two matrix products."""
    tokens = src.shape[0] * src.shape[1] if src.dim() == 3 else src.shape[0]
    return _mha_flops(src, src, src, embed_dim) + 4 * tokens * ffn_weight_1.shape[0] * ffn_weight_1.shape[1]


def _rnn_layer_flops(x, weight_ih, weight_hh, *_) -> int:
    """One direction of one LSTM layer as the CPU runs it (``aten::mkldnn_rnn_layer``), which torch's FLOP
    counter has no formula for: every time step's input and hidden projections into the gates."""
    tokens = x.numel() // x.shape[-1]
    return 2 * tokens * weight_ih.shape[0] * (weight_ih.shape[1] + weight_hh.shape[1])


def count_flops(model, inputs: tuple) -> FlopCount:
    """Run one no-grad forward and add up the FLOPs of every op torch's FLOP counter has a formula for
    (``torch.utils.flop_counter``: mm, addmm, bmm, baddbmm, convolution of every kind, the fused
    attention kernels). CPU's flash attention kernel is counted with the flash formula, torch's fused
    multi-head attention, encoder layer and LSTM layer by hand (below); GRU and RNN layers run as
    matrix products the counter sees. An op of a FLOP family without a formula is listed in ``uncounted``."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    aliases = {
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: torch.ops.aten._scaled_dot_product_flash_attention
    }
    by_hand = {
        torch.ops.aten._native_multi_head_attention: _mha_flops,
        torch.ops.aten._transformer_encoder_layer_fwd: _encoder_layer_flops,
        torch.ops.aten.mkldnn_rnn_layer: _rnn_layer_flops,
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
