"""The Workload: one model to profile, its fixed input, its fp32 reference output and its FLOPs per family.

common.workload.loader makes one from a workload file; torch is imported only when a model is built or run.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common import cache
from common.errors import LabError
from common.workload.outputs import compare_outputs, flatten_output, output_arrays
from common.workload.record import Expected, FlopCount, Record, no_expectation

if TYPE_CHECKING:  # numpy is imported where outputs are compared: a report on a CSV never needs it
    import numpy as np

SEED = 0  # build_model() runs under this torch seed, make_input() under SEED + 1

WARMUP_FORWARDS = 3  # excluded from timing: first calls pay allocation and dispatch caches
MEASURED_FORWARDS = 20
# The name of the range a profiled program marks each forward with (msprof_tx with --msproftx=on): what
# the profiler recorded inside one range is compared with what it recorded inside the others.
FORWARD_RANGE = "msprof_lab.forward"


@dataclass(eq=False)
class Workload:
    """One model to profile: how to build it and its input, its reference output and its FLOPs."""

    name: str
    path: str | None  # the workload file; None for the default, TinyMLP
    sha256: str  # of the file's bytes
    _build: Callable[[], Any] = field(repr=False)
    _make_input: Callable[[], Any] = field(repr=False)
    loss: Callable[[Any, Any], Any] | None = field(default=None, repr=False)
    expectations: dict[str, Any] = field(default_factory=dict)
    _reference: tuple[np.ndarray, ...] | None = field(default=None, repr=False)
    _flops: FlopCount | None = field(default=None, repr=False)
    _precision: str | None = field(default=None, repr=False)
    _fp32_reference: tuple[np.ndarray, ...] | None = field(default=None, repr=False)
    _read: set = field(default_factory=set, repr=False)  # the files its import and forward read (cache.Watch)
    _kept: Record | None = field(default=None, repr=False)  # its record in .lab_cache, once there is one
    _inputs_desc: str | None = field(default=None, repr=False)  # "(32, 1024) float32": make_input()'s tensors
    _fp32_inputs: tuple[np.ndarray, ...] | None = field(default=None, repr=False)  # as fp32_input_arrays()
    _parameters: list[str] | None = field(default=None, repr=False)  # forward()'s positional parameter names

    @property
    def where(self) -> str:
        return f"workload file {self.path}" if self.path else f"the built-in {self.name}"

    def info(self) -> dict[str, Any]:
        """What run_info.json records about the workload."""
        return {"name": self.name, "path": self.path, "sha256": self.sha256}

    @property
    def samples(self) -> int | None:
        """Samples per forward: the first dimension of the first input (the batch of a batch-first model), what
        compare divides a step by when two runs' batches differ; None for a 0-d input."""
        first = self.inputs()[0]
        return int(first.shape[0]) if first.dim() >= 1 else None

    def build_model(self):
        """The model with its random initialisation fixed by ``SEED``, in eval mode."""
        import torch

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(SEED)
            model = self._build()
        if not isinstance(model, torch.nn.Module):
            raise LabError(
                f"{self.where}: build_model() returned {type(model).__name__}, not a torch.nn.Module",
                "make build_model() return the model (an nn.Module instance)",
            )
        return model.eval()

    def make_input(self):
        """The fixed input: a tensor, or a tuple of tensors passed as separate arguments."""
        import torch

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(SEED + 1)
            x = self._make_input()
        items = tuple(x) if isinstance(x, (tuple, list)) else (x,)
        if not items or not all(isinstance(t, torch.Tensor) for t in items):
            raise LabError(
                f"{self.where}: make_input() returned {_kinds(x)}, not a tensor or a tuple of tensors",
                "make make_input() return the model's input: a torch.Tensor, or a tuple of them",
            )
        return items if isinstance(x, (tuple, list)) else x

    def inputs(self) -> tuple:
        """make_input() as a tuple of positional arguments for the model."""
        x = self.make_input()
        return x if isinstance(x, tuple) else (x,)

    @staticmethod
    def forward(model, x):
        """``model(x)``, or ``model(*x)`` for a tuple of inputs."""
        return model(*x) if isinstance(x, tuple) else model(x)

    @property
    def precision(self) -> str:
        """``fp32``, or ``fp16`` / ``bf16`` when the model's weights or outputs are in that dtype."""
        if self._precision is None:
            self._reference_arrays()
        return self._precision

    def fp32_copy(self):
        """The model and its inputs in fp32 (what mode 03 exports): the model itself when it is fp32 already;
        an fp16 / bf16 model converted with ``.float()``, its floating-point inputs likewise."""
        model, x = self.build_model(), self.inputs()
        if self.precision == "fp32":
            return model, x
        return model.float(), tuple(t.float() if t.is_floating_point() else t for t in x)

    def fp32_reference(self) -> tuple[np.ndarray, ...]:
        """The CPU output of :meth:`fp32_copy` (the reference itself for an fp32 model); computed once."""
        if self.precision == "fp32":
            return self._reference_arrays()
        if self._fp32_reference is None:
            import torch

            model, x = self.fp32_copy()
            with torch.no_grad():
                self._fp32_reference = tuple(output_arrays(model(*x)))
            if self._kept:
                self._kept.keep(self)
        return self._fp32_reference

    def reference_output(self):
        """The CPU output of the model on its input, without any profiler (a copy; one array per output)."""
        arrays = self.reference_output_arrays()
        return arrays[0] if len(arrays) == 1 else arrays

    def reference_output_arrays(self) -> tuple[np.ndarray, ...]:
        """The reference as a tuple of arrays, one per output (copies)."""
        return tuple(a.copy() for a in self._reference_arrays())

    def compare_to_reference(self, output) -> dict[str, float]:
        """Max abs diff, mean abs diff and cosine of ``output`` against the reference."""
        return compare_outputs(output, self._reference_arrays())

    def forward_flops(self, count: Callable[[Any, tuple], FlopCount]) -> FlopCount:
        """FLOPs of one forward per family, as ``count(model, inputs)`` finds them (the lab's counter:
        common.collect.flop_count.count_flops); computed once, kept with the record."""
        if self._flops is None:
            self._flops = count(self.build_model(), self.inputs())
            if self._kept:
                self._kept.keep(self)
        return self._flops

    def fp32_input_arrays(self) -> tuple[np.ndarray, ...]:
        """make_input()'s tensors as numpy arrays, floating-point ones in fp32 (what an fp32 export is fed)."""
        self._reference_arrays()
        return self._fp32_inputs

    def forward_parameters(self) -> list[str]:
        """The names of forward()'s positional parameters (``['x']`` for TinyMLP)."""
        self._reference_arrays()
        return list(self._parameters)

    def record_files(self) -> list[str] | None:
        """The files its record in .lab_cache vouches for (the workload file, every file its import and forward
        read); None when it has none (the cache is off). Runs the checked forward when nothing has yet."""
        self._reference_arrays()
        return list(self._kept.inputs["files"]) if self._kept else None

    def summary(self) -> str:
        """One line: the input and output shapes, the precision, whether a loss is defined."""
        outputs = ", ".join(str(a.shape) for a in self._reference_arrays())
        return (
            f"workload {self.name} ({self.where}): input {self._inputs_desc}; output {outputs}; {self.precision}; "
            f"loss {'defined' if self.loss else 'not defined'}"
        )

    def not_applicable(self, key: str) -> str:
        return no_expectation(self.name, key)

    def expected(self, fp32: bool = True) -> Expected:
        """What a run of it is checked against (:class:`Expected`), computed here (the model may run): the checks
        are handed it. ``fp32`` false: without the fp32 reference (an fp16 / bf16 model's would run its fp32 copy)."""
        outputs = self._reference_arrays()
        return Expected(
            self.name,
            self.path,
            self.sha256,
            self.precision,
            outputs,
            self.fp32_reference() if fp32 else outputs,
            dict(self.expectations),
        )

    def _reference_arrays(self) -> tuple[np.ndarray, ...]:
        if self._reference is None and not Record.restore(self):
            with cache.Watch() as read:
                self._reference = tuple(output_arrays(self._checked_forward()))
            self._read |= read.files
            Record.create(self)
        return self._reference

    def _checked_forward(self):
        """One forward on the fixed input (no grad), with the user's mistakes turned into LabErrors."""
        import torch

        model, x = self.build_model(), self.make_input()
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # one summation order, whichever process computes (or computed) the reference
        try:
            with torch.no_grad():
                out = self.forward(model, x)
        except Exception as err:  # noqa: BLE001 (the user's model: any failure is theirs to fix)
            shapes = ", ".join(str(tuple(t.shape)) for t in (x if isinstance(x, tuple) else (x,)))
            line = _user_line(err, self.path)
            if line:  # it failed in the user's own code: point there
                raise LabError(
                    f"{self.where}: forward() failed at {line} on the input of make_input() (shapes "
                    f"{shapes}): {first_line(err)}",
                    "fix the model's code there, or make make_input() return what forward() takes "
                    "(a tuple is passed as separate arguments)",
                ) from None
            raise LabError(
                f"{self.where}: the model rejects the input of make_input() (shapes {shapes}): {first_line(err)}",
                "make make_input() return what forward() takes (a tuple is passed as separate arguments)",
            ) from None
        finally:
            torch.set_num_threads(threads)
        items = flatten_output(out)
        if not items or not all(isinstance(t, torch.Tensor) for t in items):
            raise LabError(
                f"{self.where}: the model returned {_kinds(out)}, not tensors",
                "make forward() return a tensor, or a tuple, list, dict or dataclass of tensors (docs/own_model.md)",
            )
        tensors = x if isinstance(x, tuple) else (x,)
        self._inputs_desc = ", ".join(f"{tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}" for t in tensors)
        self._fp32_inputs = tuple((t.float() if t.is_floating_point() else t).detach().cpu().numpy() for t in tensors)
        params = inspect.signature(model.forward).parameters.values()
        self._parameters = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        low = {torch.float16: "fp16", torch.bfloat16: "bf16"}
        dtypes = [t.dtype for t in items] + [p.dtype for p in model.parameters()]
        self._precision = next((low[d] for d in dtypes if d in low), "fp32")
        if self.loss is not None:
            try:
                with torch.no_grad():
                    value = self.loss(out, x)
            except Exception as err:  # noqa: BLE001 (the user's code)
                raise LabError(
                    f"{self.where}: loss(output, input) failed: {first_line(err)}",
                    "make loss() take the model's output and make_input()'s value",
                ) from None
            if not isinstance(value, torch.Tensor) or value.numel() != 1:
                raise LabError(
                    f"{self.where}: loss(output, input) returned {_describe(value)}, not a scalar tensor",
                    "make loss() return one number as a tensor (e.g. a .mean())",
                )
        return out


def _user_line(err: BaseException, path: str | None) -> str | None:
    """``file:line (function)`` of the last frame of the traceback in the workload file, if any."""
    import traceback

    if path is None:
        return None
    frames = [f for f in traceback.extract_tb(err.__traceback__) if Path(f.filename).resolve() == Path(path)]
    return f"{path}:{frames[-1].lineno} ({frames[-1].name})" if frames else None


def first_line(err: BaseException) -> str:
    """``Type: first line of the message``: an exception of the user's code, for a one-line LabError."""
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__


def _kinds(value) -> str:
    """``dict``, or ``a tuple of Tensor, NoneType``: what a function returned, for an error line."""
    if isinstance(value, dict):
        return f"a dict of {', '.join(type(v).__name__ for v in value.values()) or 'nothing'}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {', '.join(type(v).__name__ for v in value) or 'nothing'}"
    return type(value).__name__


def _describe(value) -> str:
    shape = getattr(value, "shape", None)
    return f"a tensor of shape {tuple(shape)}" if shape is not None else type(value).__name__
