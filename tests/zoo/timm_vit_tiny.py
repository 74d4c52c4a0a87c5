"""timm's ViT-Tiny at 64x64 (vision transformer: patch embedding, fused attention), random weights."""

REQUIRES = ["torchvision==0.28.0", "timm==1.0.31", "transformers==5.24.0"]

import timm
import torch


def build_model():
    return timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=64, num_classes=10)


def make_input():
    return torch.randn(2, 3, 64, 64)
