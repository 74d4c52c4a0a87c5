"""WRONG ON PURPOSE: an MLP whose output drifts by a factor (1 + 2e-4) from its 2nd call on.

Exercises Linear + GELU; a reference taken on the 1st call misses the drift, while comparing any later
call to it (at a tight tolerance) catches it. Input [16, 128].
"""

import torch
from torch import nn


class ScaledFromSecondCall(nn.Module):
    def __init__(self, dim=128, hidden=256, out=16):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, out)
        )
        for layer in self.net:
            if isinstance(layer, nn.Linear):
                nn.init.kaiming_uniform_(layer.weight, nonlinearity="relu")
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        out = self.net(x)
        if self.calls >= 2:
            out = out * (1 + 2e-4)
        return out


def build_model():
    return ScaledFromSecondCall()


def make_input():
    g = torch.Generator().manual_seed(0)
    return torch.randn(16, 128, generator=g)


def loss(output, input):
    return output.pow(2).mean()
