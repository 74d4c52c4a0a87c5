"""Hugging Face GPT2LMHeadModel from a small config, as written (decoder, its KV cache on)."""

REQUIRES = ["torchvision==0.28.0", "timm==1.0.31", "transformers==5.24.0"]

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def build_model():
    return GPT2LMHeadModel(GPT2Config(vocab_size=1000, n_positions=64, n_embd=64, n_layer=2, n_head=2))


def make_input():
    return torch.randint(0, 1000, (2, 16))
