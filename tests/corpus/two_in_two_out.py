"""A two-input, two-output model: an image branch ([2, 3, 16, 16]) and a tabular branch ([2, 10]) fused.

forward(image, features) returns a tuple (logits, embedding). Exercises Conv2d, BatchNorm2d, ReLU,
AdaptiveAvgPool2d, torch.cat fusion of the two branches, Linear layers and F.normalize (L2 norm).
"""

import torch
from torch import nn
from torch.nn import functional as F


class ImageTabularNet(nn.Module):
    def __init__(self, num_features=10, num_classes=6, embed_dim=32):
        super().__init__()
        self.image_branch = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.tab_branch = nn.Sequential(nn.Linear(num_features, 32), nn.ReLU())
        self.fuse = nn.Linear(64, embed_dim)
        self.classifier = nn.Linear(embed_dim, num_classes)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")

    def forward(self, image, features):
        fused = torch.cat([self.image_branch(image), self.tab_branch(features)], dim=1)
        hidden = F.relu(self.fuse(fused))
        logits = self.classifier(hidden)
        embedding = F.normalize(hidden, dim=-1)
        return logits, embedding


def build_model():
    return ImageTabularNet()


def make_input():
    g = torch.Generator().manual_seed(0)
    image = torch.randn(2, 3, 16, 16, generator=g)
    features = torch.randn(2, 10, generator=g)
    return image, features


def loss(output, input):
    logits, embedding = output
    return F.cross_entropy(logits, torch.tensor([1, 4])) + embedding.pow(2).sum(-1).sub(1).abs().mean()
