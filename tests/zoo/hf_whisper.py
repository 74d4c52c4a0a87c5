"""Hugging Face WhisperForConditionalGeneration from a small config (audio encoder-decoder: log-mel frames in)."""

REQUIRES = ["torchvision==0.28.0", "timm==1.0.31", "transformers==5.24.0"]

import torch
from transformers import WhisperConfig, WhisperForConditionalGeneration


def build_model():
    return WhisperForConditionalGeneration(
        WhisperConfig(
            vocab_size=1000,
            num_mel_bins=16,
            d_model=64,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=128,
            decoder_ffn_dim=128,
            max_source_positions=50,
            max_target_positions=32,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            decoder_start_token_id=1,
        )
    )


def make_input():  # forward(input_features, attention_mask, decoder_input_ids): 100 frames = 2 x max_source_positions
    return torch.randn(1, 16, 100), torch.ones(1, 100, dtype=torch.long), torch.randint(3, 1000, (1, 8))
