"""Hugging Face T5ForConditionalGeneration from a small config (encoder-decoder: relative position bias, cross-attention)."""

REQUIRES = ["torchvision==0.28.0", "timm==1.0.31", "transformers==5.24.0"]

import torch
from transformers import T5Config, T5ForConditionalGeneration


def build_model():
    return T5ForConditionalGeneration(
        T5Config(vocab_size=1000, d_model=64, d_kv=32, d_ff=128, num_layers=2, num_heads=2, decoder_start_token_id=0)
    )


def make_input():  # forward(input_ids, attention_mask, decoder_input_ids)
    ids = torch.randint(0, 1000, (2, 16))
    return ids, torch.ones_like(ids), torch.randint(0, 1000, (2, 8))
