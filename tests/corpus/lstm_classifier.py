"""A sequence classifier: a 2-layer batch-first LSTM over float features [4, 20, 32], last time step, Linear.

Exercises nn.LSTM (stacked, with dropout between layers in training), slicing the last step and a
Linear head; loss is cross-entropy on fixed labels.
"""

import torch
from torch import nn
from torch.nn import functional as F


class LSTMClassifier(nn.Module):
    def __init__(self, input_size=32, hidden_size=64, num_layers=2, num_classes=5):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers=num_layers, batch_first=True, dropout=0.1)
        self.fc = nn.Linear(hidden_size, num_classes)
        nn.init.xavier_uniform_(self.fc.weight)
        nn.init.zeros_(self.fc.bias)

    def forward(self, x):
        out, _ = self.lstm(x)  # out: [B, T, H]; (h_n, c_n) unused
        last = out[:, -1, :]
        return self.fc(last)


def build_model():
    return LSTMClassifier()


def make_input():
    g = torch.Generator().manual_seed(0)
    return torch.randn(4, 20, 32, generator=g)


def loss(output, input):
    labels = torch.tensor([0, 4, 2, 1])
    return F.cross_entropy(output, labels)
