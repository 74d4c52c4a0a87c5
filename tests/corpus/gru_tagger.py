"""A sequence tagger: a bidirectional GRU over [4, 16, 24] and a Linear applied at every time step.

Exercises nn.GRU(bidirectional=True, batch_first=True), concatenated forward/backward states and a
per-timestep Linear on a 3-D tensor; loss is token-level cross-entropy.
"""

import torch
from torch import nn
from torch.nn import functional as F


class GRUTagger(nn.Module):
    def __init__(self, input_size=24, hidden_size=48, num_tags=9):
        super().__init__()
        self.gru = nn.GRU(input_size, hidden_size, batch_first=True, bidirectional=True)
        self.tagger = nn.Linear(2 * hidden_size, num_tags)

    def forward(self, x):
        out, _ = self.gru(x)  # [B, T, 2H]
        return self.tagger(out)  # [B, T, num_tags]


def build_model():
    return GRUTagger()


def make_input():
    g = torch.Generator().manual_seed(0)
    return torch.randn(4, 16, 24, generator=g)


def loss(output, input):
    tags = torch.arange(output.shape[0] * output.shape[1]).reshape(output.shape[:2]) % output.shape[-1]
    return F.cross_entropy(output.reshape(-1, output.shape[-1]), tags.reshape(-1))
