"""Hugging Face Qwen2ForCausalLM from a small config, as written (decoder with biased QKV projections; its KV cache on)."""

REQUIRES = ["torchvision==0.28.0", "timm==1.0.31", "transformers==5.24.0"]

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM


def build_model():
    return Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=1000,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
        )
    )


def make_input():
    return torch.randint(0, 1000, (2, 16))
