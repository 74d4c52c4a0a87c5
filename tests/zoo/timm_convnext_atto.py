"""timm's ConvNeXt-Atto (vision: depthwise 7x7 conv, LayerNorm over channels, GELU MLP), random weights."""

REQUIRES = ["torchvision==0.28.0", "timm==1.0.31", "transformers==5.24.0"]

import timm
import torch


def build_model():
    return timm.create_model("convnext_atto", pretrained=False, num_classes=10)


def make_input():
    return torch.randn(2, 3, 64, 64)
