"""A workload for tests/unit/test_precision.py: one layer, ``amplify``, whose outputs exceed fp16's range.

fp16's largest finite value is 65504. ``amplify`` sums 64 ReLU outputs (mean ~0.2) with every weight 5000
(itself representable in fp16), so its outputs are ~1e4..1e5 and most overflow to inf in fp16; ``shrink``
brings them back to ~1, so the fp32 model is an ordinary one. The fp16 paths must name ``amplify`` first.
"""

import torch
from torch import nn

AMPLIFY_WEIGHT = 5000.0


class Overflow(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(64, 64)
        self.act = nn.ReLU()
        self.amplify = nn.Linear(64, 64)
        self.shrink = nn.Linear(64, 8)
        with torch.no_grad():
            self.amplify.weight.fill_(AMPLIFY_WEIGHT)
            self.amplify.bias.zero_()
            self.shrink.weight.mul_(1e-4)

    def forward(self, x):
        return self.shrink(self.amplify(self.act(self.inp(x))))


def build_model() -> nn.Module:
    return Overflow()


def make_input():
    return torch.randn(8, 64)
