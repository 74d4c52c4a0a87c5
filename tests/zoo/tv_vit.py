"""torchvision's VisionTransformer class, 2 layers of width 64 (vision: patch conv, class token, encoder blocks)."""

REQUIRES = ["torchvision==0.28.0", "timm==1.0.31", "transformers==5.24.0"]

import torch
from torchvision.models.vision_transformer import VisionTransformer


def build_model():
    return VisionTransformer(
        image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=64, mlp_dim=128, num_classes=10
    )


def make_input():
    return torch.randn(2, 3, 32, 32)
