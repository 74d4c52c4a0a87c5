"""torchvision's R3D-18 (video: 3D convolutions over 4 frames), random weights."""

REQUIRES = ["torchvision==0.28.0", "timm==1.0.31", "transformers==5.24.0"]

import torch
import torchvision


def build_model():
    return torchvision.models.video.r3d_18(weights=None, num_classes=10)


def make_input():
    return torch.randn(1, 3, 4, 32, 32)
