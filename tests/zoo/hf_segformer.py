"""Hugging Face SegformerForSemanticSegmentation from a small config (segmentation: overlapping patch embeddings,
efficient attention, an all-MLP decoder)."""

REQUIRES = ["torchvision==0.28.0", "timm==1.0.31", "transformers==5.24.0"]

import torch
from transformers import SegformerConfig, SegformerForSemanticSegmentation


def build_model():
    return SegformerForSemanticSegmentation(
        SegformerConfig(
            num_encoder_blocks=2,
            depths=[1, 1],
            sr_ratios=[2, 1],
            hidden_sizes=[16, 32],
            patch_sizes=[7, 3],
            strides=[4, 2],
            num_attention_heads=[1, 2],
            mlp_ratios=[2, 2],
            decoder_hidden_size=32,
            num_labels=4,
        )
    )


def make_input():
    return torch.randn(1, 3, 64, 64)
