"""A small program the lab does not own, for mode 01's zero-intrusion test.

A tiny CNN classifier, nothing from ``common``. With ``--child`` it runs a second forward
in a child process, so the test can see that children are profiled too. With ``--crash``
it raises after its forward, so the test can see a failing program's status passed on.
"""

import argparse
import subprocess
import sys

import torch
from torch import nn


def forward() -> None:
    torch.manual_seed(1)
    net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 10))
    with torch.no_grad():
        print("logits", net(torch.randn(2, 3, 8, 8)).shape)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--crash", action="store_true")
    args = parser.parse_args()
    forward()
    if args.child:
        subprocess.run([sys.executable, __file__], check=True)
    if args.crash:
        raise RuntimeError("deliberate failure after the forward")
