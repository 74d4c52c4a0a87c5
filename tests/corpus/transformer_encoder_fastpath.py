"""A stock nn.TransformerEncoder (2 layers, d_model 64, 4 heads, batch_first) on [2, 16, 64].

In eval mode under no_grad PyTorch takes the fused "fast path" (a native encoder-layer kernel
instead of separate Linear/softmax/LayerNorm ops), so op names differ from the training path.
"""

import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self, d_model=64, nhead=4, num_layers=2):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model=d_model, nhead=nhead, batch_first=True)  # default FFN 2048
        self.encoder = nn.TransformerEncoder(layer, num_layers=num_layers)

    def forward(self, x):
        return self.encoder(x)


def build_model():
    return Encoder()


def make_input():
    g = torch.Generator().manual_seed(0)
    return torch.randn(2, 16, 64, generator=g)


def loss(output, input):
    return nn.functional.mse_loss(output, input)
