"""The dict_output model, but returning a dataclass with attribute fields (like transformers' ModelOutput).

forward returns ClassifierOutput(logits=..., hidden_states=...). Exercises Linear, LayerNorm, GELU,
residual MLP blocks on [4, 12, 48], and a non-tensor, non-dict output object.
"""

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class ClassifierOutput:
    logits: torch.Tensor | None = None
    hidden_states: torch.Tensor | None = None

    def __getitem__(self, key):
        return getattr(self, key)

    def to_tuple(self):
        return tuple(v for v in (self.logits, self.hidden_states) if v is not None)


class MLPBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, dim * 4)
        self.fc2 = nn.Linear(dim * 4, dim)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class TokenClassifier(nn.Module):
    def __init__(self, in_dim=48, dim=64, num_labels=7):
        super().__init__()
        self.embed = nn.Linear(in_dim, dim)
        self.blocks = nn.Sequential(MLPBlock(dim), MLPBlock(dim))
        self.final_norm = nn.LayerNorm(dim)
        self.classifier = nn.Linear(dim, num_labels)

    def forward(self, x):
        hidden = self.final_norm(self.blocks(self.embed(x)))
        return ClassifierOutput(logits=self.classifier(hidden), hidden_states=hidden)


def build_model():
    return TokenClassifier()


def make_input():
    g = torch.Generator().manual_seed(0)
    return torch.randn(4, 12, 48, generator=g)


def loss(output, input):
    logits = output.logits
    labels = torch.arange(logits.shape[0] * logits.shape[1]) % logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels)
