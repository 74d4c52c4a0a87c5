"""torchvision's ShuffleNetV2 x0.5 (vision: channel split, shuffle by reshape and transpose), random weights."""

REQUIRES = ["torchvision==0.28.0", "timm==1.0.31", "transformers==5.24.0"]

import torch
import torchvision


def build_model():
    return torchvision.models.shufflenet_v2_x0_5(weights=None)


def make_input():
    return torch.randn(2, 3, 64, 64)
