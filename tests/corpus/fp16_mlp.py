"""A 3-layer MLP held in half precision: build_model returns model.half() and the input is float16.

Exercises fp16 Linear (addmm) and SiLU end to end, with no casts inside the model; input [16, 256].
"""

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, dim=256, hidden=512, out=32):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(dim, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, out)
        )
        for layer in self.net:
            if isinstance(layer, nn.Linear):
                nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
                nn.init.zeros_(layer.bias)

    def forward(self, x):
        return self.net(x)


def build_model():
    return MLP().half()


def make_input():
    g = torch.Generator().manual_seed(0)
    return torch.randn(16, 256, generator=g).half()


def loss(output, input):
    return output.float().pow(2).mean()
