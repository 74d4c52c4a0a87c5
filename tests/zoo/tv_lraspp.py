"""torchvision's LR-ASPP MobileNetV3-Large (segmentation: dict output {'out'}, bilinear upsampling), random weights."""

REQUIRES = ["torchvision==0.28.0", "timm==1.0.31", "transformers==5.24.0"]

import torch
import torchvision


def build_model():
    return torchvision.models.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=4)


def make_input():
    return torch.randn(1, 3, 64, 64)
