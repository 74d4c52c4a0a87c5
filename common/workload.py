"""The one shared workload: TinyMLP, its fixed input and its fp32 reference.

Every mode imports this module, so all four ways of profiling look at the same
model with the same weights and the same input. To profile your own model, edit
``build_model`` and ``make_input`` (marked below) and nothing else.
"""

from __future__ import annotations

import functools
from collections import Counter

import numpy as np
import torch
from torch import nn

SEED = 0
BATCH = 32
HIDDEN = 1024
N_LINEAR = 4

WARMUP_FORWARDS = 3  # excluded from timing: first calls pay allocation and dispatch caches
MEASURED_FORWARDS = 20


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


# ===== Replace with your model: edit these two functions, keep their signatures. =====
def build_model(hidden: int = HIDDEN) -> nn.Module:
    """The model every mode profiles, with weights fixed by ``SEED``, in eval mode."""
    torch.manual_seed(SEED)
    return TinyMLP(hidden).eval()


def make_input(batch: int = BATCH, hidden: int = HIDDEN) -> torch.Tensor:
    """The fixed input, drawn from its own seeded generator so it never depends on the model."""
    generator = torch.Generator().manual_seed(SEED + 1)
    return torch.randn(batch, hidden, generator=generator)
# ===== End of the part to replace. =====


# Which op family each module type launches once per forward. A module type that is
# not listed adds nothing to the expected counts (containers, dropout in eval, ...).
_MODULE_FAMILY = {nn.Linear: "matmul", nn.GELU: "gelu"}


def expected_op_counts(model: nn.Module) -> dict[str, int]:
    """Per-forward op counts by family, derived from the model's modules (not typed in)."""
    counts: Counter[str] = Counter()
    for module in model.modules():
        family = _MODULE_FAMILY.get(type(module))
        if family:
            counts[family] += 1
    return dict(counts)


def reference_output(batch: int = BATCH, hidden: int = HIDDEN) -> np.ndarray:
    """The fp32 CPU output of the shared model on the shared input, computed without any profiler."""
    return _reference(batch, hidden).copy()  # a copy: callers may not change the cached one


@functools.lru_cache(maxsize=4)
def _reference(batch: int, hidden: int) -> np.ndarray:
    model = build_model(hidden)
    with torch.no_grad():
        return model(make_input(batch, hidden)).float().numpy()


def compare_to_reference(output: np.ndarray, reference: np.ndarray) -> dict[str, float]:
    """Max abs diff, mean abs diff and cosine similarity of an output against the reference."""
    if output.shape != reference.shape:
        from common.errors import LabError

        raise LabError(
            f"output shape {tuple(output.shape)} does not match the reference {tuple(reference.shape)}",
            "the run used a different input or model; rebuild it from common.workload",
        )
    out = output.astype(np.float64).ravel()
    ref = reference.astype(np.float64).ravel()
    diff = np.abs(out - ref)
    denom = float(np.linalg.norm(out) * np.linalg.norm(ref))
    cosine = float(out @ ref / denom) if denom else float("nan")
    return {"max_abs_diff": float(diff.max()), "mean_abs_diff": float(diff.mean()), "cosine": cosine}
