"""A workload's record between runs (in .lab_cache, common.cache), and the FLOPs it keeps.

A process that finds a valid record skips the forward, and one that needs nothing else never imports torch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import cache

# The code that computes what the record keeps: the reference (model.py, outputs.py) and the FLOPs
# (common/collect/flop_count.py, which the caller of Workload.forward_flops passes in, with the formulas of
# common/analyze/flops.py). A change to any of them makes every record stale.
COMPUTED_BY = (
    Path(__file__).with_name("model.py"),
    Path(__file__).with_name("outputs.py"),
    Path(__file__).parents[1] / "collect" / "flop_count.py",
    Path(__file__).parents[1] / "analyze" / "flops.py",
)


@dataclass(frozen=True)
class FlopCount:
    """FLOPs of one forward per family, from torch's FLOP counter formulas, and the ops of a FLOP family
    that ran without a formula (their family's total is then a lower bound, not a count); counted by
    common.collect.flop_count.count_flops."""

    per_family: dict[str, float]
    uncounted: dict[str, int] = field(default_factory=dict)  # aten op -> calls without a formula


def no_expectation(name: str, key: str) -> str:
    """Why a lesson check has nothing to compare with when the workload declares no EXPECT[key]."""
    return f"not applicable: {name} declares no EXPECT[{key!r}]"


@dataclass(frozen=True)
class Expected:
    """What a run of a workload is checked against, computed by the harness (:meth:`Workload.expected`) and
    handed to the checks, which never build or run a model: its reference outputs (the model on its input,
    without a profiler, in its own precision), the fp32 reference (the same for an fp32 model; else the
    fp32 copy's), and what the workload file declares (``EXPECT``)."""

    name: str
    path: str | None  # the workload file; None: the built-in TinyMLP
    sha256: str
    precision: str  # fp32, fp16 or bf16: the model's own
    outputs: tuple  # numpy arrays, one per output
    fp32_outputs: tuple
    expectations: dict[str, Any] = field(default_factory=dict)

    def not_applicable(self, key: str) -> str:
        return no_expectation(self.name, key)

    def precision_pointer(self) -> str:
        """For a model that is not fp32: its reference is itself in that precision, so the accuracy the precision
        gives up against fp32 is not what an output check measures; the command that measures it."""
        if self.precision == "fp32":
            return ""
        option = f" --workload {self.path}" if self.path else ""
        return (
            f"; the reference is the model itself in {self.precision}, so what {self.precision} costs in accuracy "
            f"against fp32 is not measured here: python -m common precision{option} measures it per op"
        )


class Record:
    """A workload's results kept in .lab_cache (common.cache): its reference output, precision, input shapes,
    and once computed its FLOPs and fp32 reference. Valid while the workload file, every file its import and
    forward read, the code that computes it (COMPUTED_BY) and the toolchain are unchanged. Its methods take the
    common.workload.model.Workload they fill or keep (not imported here: the model module imports this one)."""

    KIND = "workload"

    def __init__(self, key: str, inputs: dict[str, Any]) -> None:
        self.key, self.inputs = key, inputs

    @staticmethod
    def key_of(path: str | None, name: str, sha: str) -> str:
        return f"{path or name}|{sha}"

    @staticmethod
    def extra() -> dict[str, Any]:
        return {"lab": {path.name: cache.sha256_of(path) for path in COMPUTED_BY}}

    @classmethod
    def find(cls, path: str | None, name: str, sha: str) -> dict[str, Any] | None:
        """The valid record of this workload, with its arrays loaded; None when there is none."""
        key = cls.key_of(path, name, sha)
        found = cache.load(cls.KIND, key, cls.extra())
        if found is None:
            return None
        import numpy as np

        try:
            with np.load(cache.side_file(found["path"], ".npz")) as arrays:
                found["arrays"] = {k: arrays[k] for k in arrays.files}
            result = found["result"]
            for i in range(result["outputs"]):
                found["arrays"][f"reference_{i}"]  # noqa: B018 (present, or the record is not usable)
            for i in range(result["n_inputs"]):
                found["arrays"][f"input_{i}"]  # noqa: B018
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return found

    @classmethod
    def restore(cls, work: Any, found: dict[str, Any] | None = None) -> bool:
        """Fill ``work`` from its valid record; False when there is none."""
        found = found or cls.find(work.path, work.name, work.sha256)
        if found is None:
            return False
        result, arrays = found["result"], found["arrays"]
        work._reference = tuple(arrays[f"reference_{i}"] for i in range(result["outputs"]))
        work._precision, work._inputs_desc = result["precision"], result["inputs"]
        work._fp32_inputs = tuple(arrays[f"input_{i}"] for i in range(result["n_inputs"]))
        work._parameters = list(result["parameters"])
        if result.get("flops") is not None:
            work._flops = FlopCount(result["flops"]["per_family"], result["flops"]["uncounted"])
        if result.get("fp32_outputs"):
            work._fp32_reference = tuple(arrays[f"fp32_reference_{i}"] for i in range(result["fp32_outputs"]))
        work._kept = cls(found["key"], found["inputs"])
        return True

    @classmethod
    def create(cls, work: Any) -> None:
        """Record ``work`` after its checked forward, with the files it read."""
        read = work._read | ({Path(work.path)} if work.path else set())
        work._kept = cls(cls.key_of(work.path, work.name, work.sha256), cache.inputs_of(read, cls.extra()))
        work._kept.keep(work)

    def keep(self, work: Any) -> None:
        """Write the record as ``work`` now knows it: its arrays first, then the JSON that vouches for them."""
        import numpy as np

        where = cache.record_path(self.KIND, self.key)
        if where is None or work._reference is None:
            return
        arrays = {f"reference_{i}": a for i, a in enumerate(work._reference)}
        arrays |= {f"input_{i}": a for i, a in enumerate(work._fp32_inputs or ())}
        arrays |= {f"fp32_reference_{i}": a for i, a in enumerate(work._fp32_reference or ())}
        try:
            where.parent.mkdir(parents=True, exist_ok=True)
            temp = where.with_name(f"{where.stem}.{os.getpid()}.tmp.npz")
            np.savez(temp, **arrays)
            os.replace(temp, cache.side_file(where, ".npz"))
        except OSError:
            return
        flops = work._flops
        cache.save(
            self.KIND,
            self.key,
            self.inputs,
            {
                "name": work.name,
                "path": work.path,
                "sha256": work.sha256,
                "precision": work._precision,
                "inputs": work._inputs_desc,
                "n_inputs": len(work._fp32_inputs or ()),
                "parameters": work._parameters,
                "outputs": len(work._reference),
                "fp32_outputs": len(work._fp32_reference or ()),
                "expectations": work.expectations,
                "has_loss": work.loss is not None,
                "flops": {"per_family": flops.per_family, "uncounted": flops.uncounted} if flops else None,
            },
        )
