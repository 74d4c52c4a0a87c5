"""A model's output: flattened to its tensors in a fixed order, as fp32 arrays, compared with a reference.

numpy and torch are imported where they are used: a report on a CSV never needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from common.errors import LabError

if TYPE_CHECKING:
    import numpy as np


def flatten_output(output, _within: frozenset = frozenset()) -> list:
    """A model's output as a flat list of its tensors, in a fixed order (docs/own_model.md), by torch's own pytree
    (``torch.utils._pytree``, what ``torch.export`` and Hugging Face flatten with): a tuple or list, its items in
    order; a dict, its values in insertion order; a namedtuple, its fields; a class registered with the pytree
    (Hugging Face's ``ModelOutput``: its fields that are not None, in declaration order), as it flattens. Any other
    object the pytree leaves whole (a dataclass, a KV cache such as transformers' ``DynamicCache``): the tensors
    among its attributes, in the order they were set (``vars()``; a dataclass's ``__init__`` sets its fields in
    declaration order). Depth first; None is left out; a number or string the model returned itself stays in the
    list (the caller refuses it). The lesson files' ``tensors()`` apply the same rule."""
    from torch.utils import _pytree as pytree

    found: list = []
    for leaf in pytree.tree_leaves(output):
        if leaf is None:  # a leaf in some torch versions' pytree (a node without children in others): no output
            continue
        if not _holds_attributes(leaf):
            found.append(leaf)
        elif id(leaf) not in _within:  # an object that refers back to one it lies in is not flattened twice
            attributes = flatten_output(list(vars(leaf).values()), _within | {id(leaf)})
            found += [t for t in attributes if hasattr(t, "detach")]  # a cache's flags and sizes are no output
    return found


def _holds_attributes(value) -> bool:
    """An instance of a plain class, whose attributes may hold tensors (a cache, a result object of one's own); not
    a tensor, a class, a function or module, nor a torch.nn.Module (its weights are not outputs)."""
    import types

    import torch

    plain = (torch.Tensor, torch.nn.Module, type, types.FunctionType, types.MethodType, types.ModuleType)
    return hasattr(value, "__dict__") and not isinstance(value, plain)


def output_arrays(output) -> list[np.ndarray]:
    """A model output (see :func:`flatten_output`), or arrays (one, or a list or tuple of them: outputs read back
    from files, with no torch imported), as fp32 numpy arrays."""
    import numpy as np

    if isinstance(output, np.ndarray):
        items = [output]
    elif isinstance(output, (list, tuple)) and all(isinstance(a, np.ndarray) for a in output):
        items = list(output)
    else:
        items = flatten_output(output)
    arrays = []
    for item in items:
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
        raise LabError(
            f"output shape {got} does not match the reference {want}",
            "the run used a different input or model; rebuild it from the same workload",
        )
    out = np.concatenate([a.astype(np.float64).ravel() for a in outs])
    ref = np.concatenate([a.astype(np.float64).ravel() for a in refs])
    if out.size == 0:
        return {"max_abs_diff": 0.0, "mean_abs_diff": 0.0, "cosine": float("nan")}
    diff = np.abs(out - ref)
    denom = float(np.linalg.norm(out) * np.linalg.norm(ref))
    # two all-zero outputs point the same way; one all-zero output against another does not
    cosine = float(out @ ref / denom) if denom else (1.0 if not diff.any() else 0.0)
    return {"max_abs_diff": float(diff.max()), "mean_abs_diff": float(diff.mean()), "cosine": cosine}
