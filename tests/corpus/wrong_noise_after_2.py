"""WRONG ON PURPOSE: an MLP that counts its calls and, from the 3rd call on, adds noise to its output.

Exercises Linear + ReLU; the output is deterministic for calls 1-2 and then carries
torch.randn_like(out) * 0.01, so checks that compare repeated runs must flag it. Input [16, 128].
"""

import torch
from torch import nn


class NoisyAfterTwo(nn.Module):
    def __init__(self, dim=128, hidden=256, out=16):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, out)
        )
        for layer in self.net:
            if isinstance(layer, nn.Linear):
                nn.init.kaiming_uniform_(layer.weight, nonlinearity="relu")
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        out = self.net(x)
        if self.calls >= 3:
            out = out + torch.randn_like(out) * 0.01
        return out


def build_model():
    return NoisyAfterTwo()


def make_input():
    g = torch.Generator().manual_seed(0)
    return torch.randn(16, 128, generator=g)


def loss(output, input):
    return output.pow(2).mean()
