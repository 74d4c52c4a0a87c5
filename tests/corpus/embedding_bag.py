"""A bag-of-words text classifier: int64 token ids [4, 24] -> nn.Embedding(1000, 64) -> masked mean -> MLP.

Exercises an embedding lookup with padding_idx, a padding mask built from the ids (ne, float cast),
a masked sum divided by the token count (clamp), and a two-layer MLP with ReLU.
"""

import torch
from torch import nn
from torch.nn import functional as F

VOCAB, DIM, PAD = 1000, 64, 0


class BagOfEmbeddings(nn.Module):
    def __init__(self, vocab_size=VOCAB, dim=DIM, num_classes=4):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, dim, padding_idx=PAD)
        self.mlp = nn.Sequential(
            nn.Linear(dim, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, num_classes)
        )
        for m in self.mlp:
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, token_ids):
        emb = self.embedding(token_ids)  # [B, L, D]
        mask = (token_ids != PAD).unsqueeze(-1).to(emb.dtype)  # [B, L, 1]
        summed = (emb * mask).sum(dim=1)
        counts = mask.sum(dim=1).clamp(min=1.0)
        pooled = summed / counts
        return self.mlp(pooled)


def build_model():
    return BagOfEmbeddings()


def make_input():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, VOCAB, (4, 24), generator=g, dtype=torch.long)
    lengths = torch.tensor([24, 17, 9, 20])
    positions = torch.arange(24).unsqueeze(0)
    return ids.masked_fill(positions >= lengths.unsqueeze(1), PAD)  # right padding


def loss(output, input):
    labels = torch.tensor([0, 1, 2, 3])
    return F.cross_entropy(output, labels)
