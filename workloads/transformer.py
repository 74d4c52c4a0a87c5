"""One pre-norm transformer encoder block: LayerNorm, self-attention, LayerNorm, GELU MLP.

Input: 4 sequences of 64 tokens, 128 features each ([4, 64, 128], batch first); output: the same
shape. ``nn.MultiheadAttention`` computes the attention (its softmax included); in eval mode
without gradients PyTorch runs it as one fused op, which is what a forward-only profile shows.
``loss`` is the mean squared output, enough to drive a backward pass.

What you would change for your own transformer: ``DIM``, ``HEADS``, ``MLP_RATIO`` and the
number of blocks in ``build_model``, or return your own model; the input shape in
``make_input``; a task loss in ``loss``.
"""

import torch
from torch import nn

BATCH, TOKENS, DIM, HEADS, MLP_RATIO = 4, 64, 128, 4, 4


class Block(nn.Module):
    def __init__(self, dim: int = DIM, heads: int = HEADS) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, MLP_RATIO * dim), nn.GELU(), nn.Linear(MLP_RATIO * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


def build_model() -> nn.Module:
    return Block()


def make_input() -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    return torch.randn(BATCH, TOKENS, DIM, generator=generator)


def loss(output: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
    return output.pow(2).mean()
