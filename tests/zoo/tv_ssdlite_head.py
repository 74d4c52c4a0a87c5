"""torchvision's SSDlite320 (MobileNetV3 backbone): its network, backbone and head, without the box decoding and NMS
after it (detection), random weights."""

REQUIRES = ["torchvision==0.28.0", "timm==1.0.31", "transformers==5.24.0"]

import torch
import torchvision
from torch import nn


class SSDNetwork(nn.Module):
    """The part of the detector a profile is about: features, then per-anchor class scores and box offsets."""

    def __init__(self):
        super().__init__()
        ssd = torchvision.models.detection.ssdlite320_mobilenet_v3_large(
            weights=None, weights_backbone=None, num_classes=5
        )
        self.backbone, self.head = ssd.backbone, ssd.head

    def forward(self, images):
        features = list(self.backbone(images).values())
        return self.head(features)  # {"bbox_regression": ..., "cls_logits": ...}


def build_model():
    return SSDNetwork()


def make_input():
    return torch.randn(1, 3, 160, 160)
