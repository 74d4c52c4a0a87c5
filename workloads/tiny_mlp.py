"""TinyMLP, the lab's default workload: four Linear(1024, 1024) layers with a GELU between each pair.

Input: a batch of 32 rows of 1024 values ([32, 1024]); output: the same shape. Almost all of its
work is matrix multiplication, which is why it ``EXPECT``s matmul to dominate: the lesson checks
compare that with what each mode profiled. It defines no ``loss``.

The lab loads it like any workload file and reports it as "TinyMLP". ``build_model`` and
``make_input`` take sizes with defaults (the lab calls them with none); mode 04's sweep and the
several-rank run call them with other sizes.
"""

import torch
from torch import nn

BATCH, HIDDEN, N_LINEAR = 32, 1024, 4

EXPECT = {"top_family": "matmul", "cast_on_03_default": True, "share_agreement_01_04": "matmul"}


class TinyMLP(nn.Module):
    """4 x Linear(1024, 1024) with a GELU between each pair (3 GELU)."""

    def __init__(self, hidden: int = HIDDEN, n_linear: int = N_LINEAR) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for i in range(n_linear):
            layers.append(nn.Linear(hidden, hidden))
            if i < n_linear - 1:
                layers.append(nn.GELU())
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def build_model(hidden: int = HIDDEN) -> nn.Module:
    return TinyMLP(hidden)


def make_input(batch: int = BATCH, hidden: int = HIDDEN) -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)  # its own seeded generator: the input never depends on the model
    return torch.randn(batch, hidden, generator=generator)
