"""Hugging Face BartForConditionalGeneration from a small config (encoder-decoder: learned positions, cross-attention)."""

REQUIRES = ["torchvision==0.28.0", "timm==1.0.31", "transformers==5.24.0"]

import torch
from transformers import BartConfig, BartForConditionalGeneration


def build_model():
    return BartForConditionalGeneration(
        BartConfig(
            vocab_size=1000,
            d_model=64,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=128,
            decoder_ffn_dim=128,
            max_position_embeddings=64,
        )
    )


def make_input():  # forward(input_ids, attention_mask, decoder_input_ids)
    ids = torch.randint(4, 1000, (2, 16))
    return ids, torch.ones_like(ids), torch.randint(4, 1000, (2, 8))
