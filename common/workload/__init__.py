"""The workload every mode profiles: a model, its fixed input, its fp32 reference, its FLOPs per family.

    loader.py   the default TinyMLP (workloads/tiny_mlp.py) or a workload file: load_workload, tiny_mlp
    model.py    the Workload: build the model and its input, the checked forward, the reference
    outputs.py  a model's output flattened to its tensors, compared with a reference
    record.py   the record kept between runs in .lab_cache, and the FlopCount it keeps
    expect.py   what EXPECT may declare (keys, types, op family names)
    threads.py  torch's thread count

FLOPs are counted by common.collect.flop_count (the caller passes its counter to Workload.forward_flops).
torch is imported only when a model is built or run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from common.workload.expect import EXPECT_KEYS
from common.workload.loader import ENV_VAR, TINY_MLP, load_workload, tiny_mlp, tiny_mlp_module, workload_identity
from common.workload.model import FORWARD_RANGE, MEASURED_FORWARDS, SEED, WARMUP_FORWARDS, Workload
from common.workload.outputs import compare_outputs, flatten_output
from common.workload.record import Expected, FlopCount
from common.workload.threads import use_threads

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "ENV_VAR",
    "EXPECT_KEYS",
    "Expected",
    "FORWARD_RANGE",
    "MEASURED_FORWARDS",
    "SEED",
    "TINY_MLP",
    "WARMUP_FORWARDS",
    "FlopCount",
    "Workload",
    "build_model",
    "compare_outputs",
    "compare_to_reference",
    "flatten_output",
    "load_workload",
    "make_input",
    "reference_output",
    "tiny_mlp",
    "tiny_mlp_module",
    "use_threads",
    "workload_identity",
]


def __getattr__(name: str) -> Any:  # TinyMLP's class and sizes, without importing torch with this package
    if name in ("TinyMLP", "BATCH", "HIDDEN", "N_LINEAR"):
        return getattr(tiny_mlp_module(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- the default workload's functions, as the modes call them -----------------------------------------
def build_model(*sizes: int):
    """TinyMLP (of another hidden size: ``build_model(hidden)``) with weights fixed by ``SEED``, in eval mode."""
    import torch

    torch.manual_seed(SEED)
    return tiny_mlp_module().build_model(*sizes).eval()


def make_input(*sizes: int):
    """TinyMLP's fixed input (of other sizes: ``make_input(batch, hidden)``), from its own seeded generator."""
    return tiny_mlp_module().make_input(*sizes)


def reference_output() -> np.ndarray:
    """TinyMLP's fp32 CPU output on its input, computed once per process (a copy)."""
    return tiny_mlp().reference_output()


def compare_to_reference(output, reference=None) -> dict[str, float]:
    """Max abs diff, mean abs diff and cosine of an output against ``reference`` (default: TinyMLP's)."""
    return compare_outputs(output, tiny_mlp()._reference_arrays() if reference is None else reference)
