"""A sparse mixture-of-experts feed-forward layer on 64 tokens of width 64 (top-2 routing, 4 experts).

Exercises a router Linear, softmax, torch.topk(k=2), a Python loop over experts with torch.where on a
boolean mask (nonzero), index_select of the routed tokens, gather of their weights and index_add_ to combine.
"""

import torch
from torch import nn
from torch.nn import functional as F


class Expert(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden)
        self.w2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.w2(F.gelu(self.w1(x)))


class MoELayer(nn.Module):
    def __init__(self, dim=64, hidden=128, num_experts=4, top_k=2):
        super().__init__()
        self.num_experts = num_experts
        self.top_k = top_k
        self.norm = nn.LayerNorm(dim)
        self.router = nn.Linear(dim, num_experts, bias=False)
        self.experts = nn.ModuleList([Expert(dim, hidden) for _ in range(num_experts)])

    def forward(self, x):
        h = self.norm(x)  # [N, D]
        probs = F.softmax(self.router(h), dim=-1)  # [N, E]
        topk_probs, topk_idx = torch.topk(probs, self.top_k, dim=-1)
        topk_probs = topk_probs / topk_probs.sum(dim=-1, keepdim=True)

        out = torch.zeros_like(h)
        for e, expert in enumerate(self.experts):
            token_idx, slot = torch.where(topk_idx == e)  # tokens routed to expert e
            if token_idx.numel() == 0:
                continue
            tokens = h.index_select(0, token_idx)
            weights = topk_probs[token_idx].gather(1, slot.unsqueeze(1))
            out.index_add_(0, token_idx, expert(tokens) * weights)
        return x + out


def build_model():
    return MoELayer()


def make_input():
    g = torch.Generator().manual_seed(0)
    return torch.randn(64, 64, generator=g)


def loss(output, input):
    return output.pow(2).mean()
