"""Hugging Face DistilBertForSequenceClassification from a small config (encoder with a classifier head)."""

REQUIRES = ["torchvision==0.28.0", "timm==1.0.31", "transformers==5.24.0"]

import torch
from transformers import DistilBertConfig, DistilBertForSequenceClassification


def build_model():
    return DistilBertForSequenceClassification(
        DistilBertConfig(
            vocab_size=1000, dim=64, n_layers=2, n_heads=2, hidden_dim=128, max_position_embeddings=64, num_labels=3
        )
    )


def make_input():
    return torch.randint(0, 1000, (2, 16))
