"""A small image classifier: two Conv-BatchNorm-ReLU-MaxPool stages and a Linear head.

Input: a batch of 8 RGB images of 32 x 32 pixels ([8, 3, 32, 32]); output: 10 class scores per
image. ``loss`` is the cross-entropy against fixed labels, so a training step can be profiled too.

It declares no ``EXPECT``: which family dominates a network this small depends on the machine (on
a CPU, pooling and convolution trade places with the thread count), so the lesson checks that
need a declared expectation report "not applicable" for it.

What you would change for your own CNN: the layers in ``SmallCNN`` (or import your model and
return it from ``build_model``), the input shape in ``make_input`` (keep the seeded generator so
every run sees the same images), and the labels in ``loss``.
"""

import torch
from torch import nn
from torch.nn import functional as F

BATCH, CHANNELS, SIZE, CLASSES = 8, 3, 32, 10


class SmallCNN(nn.Module):
    def __init__(self, classes: int = CLASSES) -> None:
        super().__init__()

        def stage(c_in: int, c_out: int) -> nn.Sequential:
            return nn.Sequential(
                nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(), nn.MaxPool2d(2)
            )

        self.features = nn.Sequential(stage(CHANNELS, 32), stage(32, 64))
        self.head = nn.Linear(64 * (SIZE // 4) ** 2, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


def build_model() -> nn.Module:
    return SmallCNN()


def make_input() -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    return torch.randn(BATCH, CHANNELS, SIZE, SIZE, generator=generator)


def loss(output: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
    labels = torch.arange(output.shape[0]) % output.shape[1]  # fixed labels: 0, 1, 2, ...
    return F.cross_entropy(output, labels)
