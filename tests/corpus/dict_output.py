"""A small token classifier that returns a dict {"logits": ..., "hidden": ...}, Hugging Face style.

Exercises Linear, LayerNorm, GELU, a residual MLP block and a dict (not a tensor) as the forward output
on input [4, 12, 48].
"""

import torch
from torch import nn
from torch.nn import functional as F


class MLPBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, dim * 4)
        self.fc2 = nn.Linear(dim * 4, dim)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class DictOutputModel(nn.Module):
    def __init__(self, in_dim=48, dim=64, num_labels=7):
        super().__init__()
        self.embed = nn.Linear(in_dim, dim)
        self.blocks = nn.Sequential(MLPBlock(dim), MLPBlock(dim))
        self.final_norm = nn.LayerNorm(dim)
        self.classifier = nn.Linear(dim, num_labels)

    def forward(self, x):
        hidden = self.final_norm(self.blocks(self.embed(x)))
        return {"logits": self.classifier(hidden), "hidden": hidden}


def build_model():
    return DictOutputModel()


def make_input():
    g = torch.Generator().manual_seed(0)
    return torch.randn(4, 12, 48, generator=g)


def loss(output, input):
    logits = output["logits"]
    labels = torch.arange(logits.shape[0] * logits.shape[1]) % logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels)
