"""timm's MobileViT-XXS (vision: convolutions and transformer blocks over unfolded patches), random weights."""

REQUIRES = ["torchvision==0.28.0", "timm==1.0.31", "transformers==5.24.0"]

import timm
import torch


def build_model():
    return timm.create_model("mobilevit_xxs", pretrained=False, num_classes=10)


def make_input():
    return torch.randn(2, 3, 64, 64)
