"""WRONG ON PURPOSE: an MLP that adds noise to its output only while a torch profiler is active.

Exercises Linear + ReLU; it checks torch.autograd.profiler._is_profiler_enabled at call time and then
adds torch.randn_like(out) * 0.01, so an unprofiled reference and a profiled run disagree. Input [16, 128].
"""

import torch
from torch import nn


class NoisyWhenProfiled(nn.Module):
    def __init__(self, dim=128, hidden=256, out=16):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, out)
        )
        for layer in self.net:
            if isinstance(layer, nn.Linear):
                nn.init.kaiming_uniform_(layer.weight, nonlinearity="relu")

    def forward(self, x):
        out = self.net(x)
        if torch.autograd.profiler._is_profiler_enabled:
            out = out + torch.randn_like(out) * 0.01
        return out


def build_model():
    return NoisyWhenProfiled()


def make_input():
    g = torch.Generator().manual_seed(0)
    return torch.randn(16, 128, generator=g)


def loss(output, input):
    return output.pow(2).mean()
