"""Hugging Face VideoMAEModel from a small config (video transformer: tubelet Conv3d embedding over 4 frames)."""

REQUIRES = ["torchvision==0.28.0", "timm==1.0.31", "transformers==5.24.0"]

import torch
from transformers import VideoMAEConfig, VideoMAEModel


def build_model():
    return VideoMAEModel(
        VideoMAEConfig(
            image_size=32,
            patch_size=8,
            num_frames=4,
            tubelet_size=2,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=128,
        )
    )


def make_input():  # [batch, frames, channels, height, width]
    return torch.randn(1, 4, 3, 32, 32)
