"""A wav2vec-style convolutional audio encoder on raw waveforms ([2, 1, 4000]) and a classifier.

Exercises strided Conv1d stacks, GroupNorm (first layer) and LayerNorm over channels (transposes),
GELU, a mean over time and a Linear head.
"""

import torch
from torch import nn
from torch.nn import functional as F


class ConvFeatureExtractor(nn.Module):
    def __init__(self, channels=64, layers=((10, 5), (3, 2), (3, 2), (3, 2), (2, 2))):
        super().__init__()
        self.convs = nn.ModuleList()
        self.norms = nn.ModuleList()
        in_ch = 1
        for i, (k, s) in enumerate(layers):
            self.convs.append(nn.Conv1d(in_ch, channels, kernel_size=k, stride=s, bias=False))
            self.norms.append(nn.GroupNorm(channels, channels) if i == 0 else nn.LayerNorm(channels))
            in_ch = channels

    def forward(self, wav):
        x = wav
        for conv, norm in zip(self.convs, self.norms):
            x = conv(x)
            if isinstance(norm, nn.LayerNorm):
                x = norm(x.transpose(1, 2)).transpose(1, 2)
            else:
                x = norm(x)
            x = F.gelu(x)
        return x  # [B, C, T']


class AudioClassifier(nn.Module):
    def __init__(self, num_classes=12, channels=64, hidden=128):
        super().__init__()
        self.features = ConvFeatureExtractor(channels)
        self.proj = nn.Linear(channels, hidden)
        self.head = nn.Linear(hidden, num_classes)
        for m in self.modules():
            if isinstance(m, (nn.Conv1d, nn.Linear)):
                nn.init.kaiming_normal_(m.weight)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, wav):
        feats = self.features(wav)
        pooled = feats.mean(dim=-1)
        return self.head(F.gelu(self.proj(pooled)))


def build_model():
    return AudioClassifier()


def make_input():
    g = torch.Generator().manual_seed(0)
    t = torch.arange(4000) / 16000.0
    tone = torch.sin(2 * torch.pi * 440.0 * t)
    wav = 0.5 * tone + 0.1 * torch.randn(2, 1, 4000, generator=g)
    return wav


def loss(output, input):
    labels = torch.tensor([2, 5])
    return F.cross_entropy(output, labels)
