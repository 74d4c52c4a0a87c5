"""A model's output: flattened to its tensors in a fixed order, as fp32 arrays, compared with a reference.

numpy and torch are imported where they are used: a report on a CSV never needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from common.errors import LabError

if TYPE_CHECKING:
    import numpy as np


def flatten_output(output) -> list:
    """A model's output as a flat list of its tensors, in a fixed order (docs/own_model.md): a tensor is
    itself; a tuple or list, its items in order; a dict, its values in insertion order; a dataclass
    (Hugging Face's ``ModelOutput`` is one), its fields in declaration order. Nested containers are
    flattened depth first; None entries (an output a model did not compute) are left out."""
    import dataclasses

    if output is None:
        return []
    if isinstance(output, (tuple, list)):
        return [t for item in output for t in flatten_output(item)]
    if isinstance(output, dict):
        return [t for item in output.values() for t in flatten_output(item)]
    if dataclasses.is_dataclass(output) and not isinstance(output, type):
        return [t for f in dataclasses.fields(output) for t in flatten_output(getattr(output, f.name))]
    return [output]


def output_arrays(output) -> list[np.ndarray]:
    """A model output (see :func:`flatten_output`) or arrays, as fp32 numpy arrays."""
    import numpy as np

    arrays = []
    for item in flatten_output(output):
        if hasattr(item, "detach"):
            item = item.detach().float().cpu().numpy()
        arrays.append(np.asarray(item, dtype=np.float32))
    return arrays


def compare_outputs(output, reference) -> dict[str, float]:
    """Max abs diff, mean abs diff and cosine similarity of an output (all its tensors) against a reference."""
    import numpy as np

    outs, refs = output_arrays(output), output_arrays(reference)
    shapes = [tuple(a.shape) for a in outs], [tuple(a.shape) for a in refs]
    if shapes[0] != shapes[1]:
        got, want = (s[0] if len(s) == 1 else s for s in shapes)
        raise LabError(f"output shape {got} does not match the reference {want}",
                       "the run used a different input or model; rebuild it from the same workload")
    out = np.concatenate([a.astype(np.float64).ravel() for a in outs])
    ref = np.concatenate([a.astype(np.float64).ravel() for a in refs])
    if out.size == 0:
        return {"max_abs_diff": 0.0, "mean_abs_diff": 0.0, "cosine": float("nan")}
    diff = np.abs(out - ref)
    denom = float(np.linalg.norm(out) * np.linalg.norm(ref))
    # two all-zero outputs point the same way; one all-zero output against another does not
    cosine = float(out @ ref / denom) if denom else (1.0 if not diff.any() else 0.0)
    return {"max_abs_diff": float(diff.max()), "mean_abs_diff": float(diff.mean()), "cosine": cosine}


