"""Multi-head self-attention written with torch.einsum on [2, 16, 64].

Exercises a fused QKV Linear, reshape/unbind into heads, einsum for Q K^T and for attention x V,
scaling, softmax, and an output Linear with a residual and LayerNorm.
"""

import math

import torch
from torch import nn


class EinsumSelfAttention(nn.Module):
    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, self.head_dim).unbind(dim=2)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(self.head_dim)
        attn = scores.softmax(dim=-1)
        ctx = torch.einsum("bhqk,bkhd->bqhd", attn, v).reshape(b, n, d)
        return self.norm(x + self.out(ctx))


def build_model():
    return EinsumSelfAttention()


def make_input():
    g = torch.Generator().manual_seed(0)
    return torch.randn(2, 16, 64, generator=g)


def loss(output, input):
    return output.pow(2).mean()
