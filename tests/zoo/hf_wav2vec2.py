"""Hugging Face Wav2Vec2Model from a small config (audio encoder: strided Conv1d feature extractor, positional conv,
transformer layers) on a raw waveform."""

REQUIRES = ["torchvision==0.28.0", "timm==1.0.31", "transformers==5.24.0"]

import torch
from transformers import Wav2Vec2Config, Wav2Vec2Model


def build_model():
    return Wav2Vec2Model(
        Wav2Vec2Config(
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=128,
            conv_dim=(32, 32, 32),
            conv_stride=(5, 2, 2),
            conv_kernel=(10, 3, 3),
            num_conv_pos_embeddings=16,
            num_conv_pos_embedding_groups=2,
        )
    )


def make_input():
    return torch.randn(2, 4000)
