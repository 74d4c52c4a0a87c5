"""Hugging Face BertModel from a small config (encoder: token ids in, last hidden state and pooler output out)."""

REQUIRES = ["torchvision==0.28.0", "timm==1.0.31", "transformers==5.24.0"]

import torch
from transformers import BertConfig, BertModel


def build_model():
    return BertModel(
        BertConfig(
            vocab_size=1000,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=128,
            max_position_embeddings=64,
        )
    )


def make_input():
    return torch.randint(0, 1000, (2, 16))
