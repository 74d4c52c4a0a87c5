"""An iterative refinement MLP with data-dependent Python control flow.

Exercises .item() host syncs: a while loop that refines until x.norm() falls below a threshold (at most
6 steps; 4 for the fixed input) and an `if x.mean() > 0:` branch choosing one of two heads.
"""

import torch
from torch import nn


class RefineNet(nn.Module):
    def __init__(self, in_dim=32, dim=64, num_classes=10, threshold=4.0, max_steps=6):
        super().__init__()
        self.threshold = threshold
        self.max_steps = max_steps
        self.encoder = nn.Linear(in_dim, dim)
        self.refine = nn.Sequential(nn.Linear(dim, dim), nn.Tanh())
        self.pos_head = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, num_classes))
        self.neg_head = nn.Linear(dim, num_classes)

    def forward(self, x):
        h = self.encoder(x)
        steps = 0
        while h.norm().item() > self.threshold and steps < self.max_steps:
            h = 0.6 * h + 0.4 * self.refine(h)
            steps += 1
        h = h * (16.0 / h.norm())  # renormalise the state after refinement
        if x.mean() > 0:  # branch on the raw input's mean
            return self.pos_head(h)
        return self.neg_head(h)


def build_model():
    return RefineNet()


def make_input():
    g = torch.Generator().manual_seed(0)
    return torch.randn(8, 32, generator=g) + 0.25  # mean about 0.25: always the positive branch


def loss(output, input):
    return nn.functional.cross_entropy(output, torch.arange(output.shape[0]) % output.shape[1])
