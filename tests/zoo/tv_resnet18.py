"""torchvision's ResNet-18 (vision: conv, batch norm, residual adds, max and average pooling), random weights."""

REQUIRES = ["torchvision==0.28.0", "timm==1.0.31", "transformers==5.24.0"]

import torch
import torchvision


def build_model():
    return torchvision.models.resnet18(weights=None)


def make_input():
    return torch.randn(2, 3, 64, 64)
