"""A MobileNet-style classifier built from inverted residual blocks.

Exercises depthwise Conv2d (groups=channels), pointwise 1x1 Conv2d, a grouped Conv2d (groups=4),
BatchNorm2d, ReLU6 and Hardswish, AdaptiveAvgPool2d(1) and a Linear head.
"""

import torch
from torch import nn


class ConvBNAct(nn.Sequential):
    def __init__(self, in_ch, out_ch, kernel_size=3, stride=1, groups=1, act=nn.ReLU6):
        padding = (kernel_size - 1) // 2
        layers = [
            nn.Conv2d(in_ch, out_ch, kernel_size, stride, padding, groups=groups, bias=False),
            nn.BatchNorm2d(out_ch),
        ]
        if act is not None:
            layers.append(act(inplace=True))
        super().__init__(*layers)


class InvertedResidual(nn.Module):
    def __init__(self, in_ch, out_ch, stride, expand_ratio, act=nn.ReLU6):
        super().__init__()
        hidden = in_ch * expand_ratio
        self.use_res = stride == 1 and in_ch == out_ch
        self.block = nn.Sequential(
            ConvBNAct(in_ch, hidden, kernel_size=1, act=act),  # pointwise expand
            ConvBNAct(hidden, hidden, stride=stride, groups=hidden, act=act),  # depthwise
            ConvBNAct(hidden, out_ch, kernel_size=1, act=None),  # pointwise project
        )

    def forward(self, x):
        out = self.block(x)
        return x + out if self.use_res else out


class MobileNetTiny(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            ConvBNAct(3, 16, stride=2),
            InvertedResidual(16, 16, 1, 2),
            InvertedResidual(16, 24, 2, 4),
            InvertedResidual(24, 24, 1, 4, act=nn.Hardswish),
            ConvBNAct(24, 48, kernel_size=3, stride=2, groups=4, act=nn.Hardswish),  # grouped conv
            InvertedResidual(48, 48, 1, 4, act=nn.Hardswish),
            ConvBNAct(48, 128, kernel_size=1, act=nn.Hardswish),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(128, num_classes))
        self._init_weights()

    def _init_weights(self):
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.features(x)
        x = torch.flatten(self.pool(x), 1)
        return self.classifier(x)


def build_model():
    return MobileNetTiny()


def make_input():
    g = torch.Generator().manual_seed(0)
    return torch.randn(4, 3, 32, 32, generator=g)


def loss(output, input):
    labels = torch.arange(output.shape[0]) % output.shape[1]
    return nn.functional.cross_entropy(output, labels)
