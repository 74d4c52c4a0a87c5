"""A small conv + MLP model held in bfloat16: build_model returns model.to(torch.bfloat16), input is bf16.

Exercises bf16 Conv1d, LayerNorm, GELU and Linear with no casts inside the model; input [8, 16, 64]
(batch, channels, length).
"""

import torch
from torch import nn
from torch.nn import functional as F


class ConvMLP(nn.Module):
    def __init__(self, channels=16, length=64, hidden=256, out=10):
        super().__init__()
        self.conv = nn.Conv1d(channels, 32, kernel_size=5, stride=2, padding=2)
        self.norm = nn.LayerNorm(32 * (length // 2))
        self.fc1 = nn.Linear(32 * (length // 2), hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, out)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Conv1d)):
            nn.init.trunc_normal_(module.weight, std=0.05)
            nn.init.zeros_(module.bias)

    def forward(self, x):
        x = F.gelu(self.conv(x)).flatten(1)
        x = self.norm(x)
        x = F.gelu(self.fc1(x))
        x = F.gelu(self.fc2(x))
        return self.fc3(x)


def build_model():
    return ConvMLP().to(torch.bfloat16)


def make_input():
    g = torch.Generator().manual_seed(0)
    return torch.randn(8, 16, 64, generator=g).to(torch.bfloat16)


def loss(output, input):
    return F.cross_entropy(output.float(), torch.arange(output.shape[0]) % output.shape[1])
