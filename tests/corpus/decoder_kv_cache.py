"""A tiny causal decoder written the way Hugging Face writes one, with its cache on: the output is a
``ModelOutput``-like dict subclass registered with ``torch.utils._pytree`` (its None fields left out), holding
the logits and a key/value cache object that nobody registered (a list of layers, each with its keys, values
and a flag), as transformers' ``DynamicCache`` is.

Flattened by the lab's rule (docs/own_model.md): logits, then layer 0's keys and values, then layer 1's.
Exercises Embedding (int64 token ids), LayerNorm, scaled dot-product attention with a causal mask, GELU.
"""

from collections import OrderedDict

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils import _pytree as pytree


class CausalLMOutput(OrderedDict):
    """Like transformers' ModelOutput: a dict of the fields that were computed, flattened by the pytree."""

    def __init__(self, logits=None, loss=None, cache=None):
        super().__init__((k, v) for k, v in (("loss", loss), ("logits", logits), ("cache", cache)) if v is not None)


pytree.register_pytree_node(
    CausalLMOutput,
    lambda o: (list(o.values()), list(o.keys())),
    lambda values, keys: CausalLMOutput(**dict(zip(keys, values))),
    serialized_type_name=f"{__name__}.CausalLMOutput",
)


class CacheLayer:
    def __init__(self, keys, values):
        self.keys, self.values, self.is_initialized = keys, values, True


class KVCache:
    def __init__(self):
        self.layers, self.offloading = [], False


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc, self.out = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x, cache):
        b, t, d = x.shape
        q, k, v = (
            z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in self.qkv(self.ln_1(x)).split(d, -1)
        )
        cache.layers.append(CacheLayer(k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln_2(x))))


class TinyDecoder(nn.Module):
    def __init__(self, vocab=96, dim=32, heads=4, layers=2, positions=16):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(positions, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln_f, self.lm_head = nn.LayerNorm(dim), nn.Linear(dim, vocab, bias=False)

    def forward(self, input_ids):
        x = self.wte(input_ids) + self.wpe(torch.arange(input_ids.shape[1]))
        cache = KVCache()
        for block in self.blocks:
            x = block(x, cache)
        return CausalLMOutput(logits=self.lm_head(self.ln_f(x)), cache=cache)


def build_model():
    return TinyDecoder()


def make_input():
    return torch.randint(0, 96, (2, 12))
