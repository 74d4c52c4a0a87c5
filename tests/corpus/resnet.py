"""A small ResNet for 32 x 32 images: a stem, three stages of basic residual blocks, a Linear head.

Exercises Conv2d + BatchNorm2d + ReLU, residual adds, stride-2 downsampling with a 1x1 conv
shortcut, MaxPool2d, AdaptiveAvgPool2d(1) and Linear; loss is cross-entropy on fixed labels.
"""

import torch
from torch import nn
from torch.nn import functional as F


class BasicBlock(nn.Module):
    def __init__(self, in_ch, out_ch, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.shortcut = nn.Identity()
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False), nn.BatchNorm2d(out_ch)
            )

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, num_classes=10, widths=(16, 32, 64)):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, widths[0], 3, padding=1, bias=False),
            nn.BatchNorm2d(widths[0]),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
        )
        layers = []
        in_ch = widths[0]
        for i, w in enumerate(widths):
            layers.append(BasicBlock(in_ch, w, stride=1 if i == 0 else 2))
            in_ch = w
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_ch, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.stem(x)
        x = self.layers(x)
        x = self.pool(x).flatten(1)
        return self.fc(x)


def build_model():
    return ResNet()


def make_input():
    g = torch.Generator().manual_seed(0)
    return torch.randn(4, 3, 32, 32, generator=g)


def loss(output, input):
    labels = torch.tensor([3, 1, 7, 0])
    return F.cross_entropy(output, labels)
