"""A tiny two-level UNet for dense prediction on 32 x 32 images.

Exercises Conv2d + ReLU encoder blocks, MaxPool2d, a bottleneck, a decoder that upsamples once with
ConvTranspose2d and once with nn.Upsample(bilinear), and torch.cat skip connections.
"""

import torch
from torch import nn


def double_conv(in_ch, out_ch):
    return nn.Sequential(
        nn.Conv2d(in_ch, out_ch, 3, padding=1),
        nn.ReLU(inplace=True),
        nn.Conv2d(out_ch, out_ch, 3, padding=1),
        nn.ReLU(inplace=True),
    )


class TinyUNet(nn.Module):
    def __init__(self, in_channels=3, out_channels=2, base=12):
        super().__init__()
        self.enc1 = double_conv(in_channels, base)
        self.enc2 = double_conv(base, base * 2)
        self.pool = nn.MaxPool2d(2)
        self.bottleneck = double_conv(base * 2, base * 4)
        # level 2: learned upsampling
        self.up2 = nn.ConvTranspose2d(base * 4, base * 2, kernel_size=2, stride=2)
        self.dec2 = double_conv(base * 4, base * 2)
        # level 1: fixed upsampling followed by a 1x1 conv to reduce channels
        self.up1 = nn.Sequential(
            nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False), nn.Conv2d(base * 2, base, 1)
        )
        self.dec1 = double_conv(base * 2, base)
        self.head = nn.Conv2d(base, out_channels, 1)

        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                nn.init.zeros_(m.bias)

    def forward(self, x):
        e1 = self.enc1(x)  # [B, 12, 32, 32]
        e2 = self.enc2(self.pool(e1))  # [B, 24, 16, 16]
        b = self.bottleneck(self.pool(e2))  # [B, 48, 8, 8]
        d2 = self.dec2(torch.cat([self.up2(b), e2], dim=1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], dim=1))
        return self.head(d1)


def build_model():
    return TinyUNet()


def make_input():
    g = torch.Generator().manual_seed(0)
    return torch.randn(2, 3, 32, 32, generator=g)


def loss(output, input):
    target = (input.mean(dim=1) > 0).long()  # a fixed per-pixel mask derived from the input
    return nn.functional.cross_entropy(output, target)
