"""The workload every mode profiles: a model, its fixed input, its fp32 reference, its FLOPs per family.

The default is TinyMLP, defined below. A workload file (``--workload FILE`` or
``MSPROF_LAB_WORKLOAD=FILE``) replaces it: a Python file with ``build_model()`` and
``make_input()``, optionally ``loss(output, input)`` and ``EXPECT`` (see docs/own_model.md).
The file is imported and run as it is: it is the user's own code, trusted like any script
they run. torch is imported only when a model is built or run.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import inspect
import os
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common import cache
from common.errors import LabError

if TYPE_CHECKING:  # numpy is imported where outputs are compared: a report on a CSV never needs it
    import numpy as np

ENV_VAR = "MSPROF_LAB_WORKLOAD"
SEED = 0  # build_model() runs under this torch seed, make_input() under SEED + 1

WARMUP_FORWARDS = 3  # excluded from timing: first calls pay allocation and dispatch caches
MEASURED_FORWARDS = 20
# The name of the range a profiled program marks each forward with (msprof_tx with --msproftx=on): what
# the profiler recorded inside one range is compared with what it recorded inside the others.
FORWARD_RANGE = "msprof_lab.forward"

# Declared expectations a workload may state in EXPECT, and the type of each value.
EXPECT_KEYS: dict[str, type] = {
    "top_family": str,  # the op family with the largest share of forward time
    "cast_on_03_default": bool,  # ATC's default precision policy inserts Casts (mode 03)
    "share_agreement_01_04": str,  # this family's share of forward time agrees between modes 01 and 04
}

_HELP = "see docs/own_model.md for what a workload file defines"


# --- TinyMLP: the default workload -------------------------------------------------------------------
BATCH = 32
HIDDEN = 1024
N_LINEAR = 4
TINY_MLP_EXPECT = {"top_family": "matmul", "cast_on_03_default": True, "share_agreement_01_04": "matmul"}


@functools.cache
def _tiny_mlp_class() -> type:
    from torch import nn

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

        def forward(self, x):
            return self.net(x)

    TinyMLP.__qualname__ = "TinyMLP"  # pickles as common.workload.TinyMLP (found by __getattr__ below)
    return TinyMLP


def build_model(hidden: int = HIDDEN):
    """TinyMLP with weights fixed by ``SEED``, in eval mode."""
    import torch

    torch.manual_seed(SEED)
    return _tiny_mlp_class()(hidden).eval()


def make_input(batch: int = BATCH, hidden: int = HIDDEN):
    """TinyMLP's fixed input, drawn from its own seeded generator so it never depends on the model."""
    import torch

    generator = torch.Generator().manual_seed(SEED + 1)
    return torch.randn(batch, hidden, generator=generator)
# --- end of TinyMLP ----------------------------------------------------------------------------------


def __getattr__(name: str) -> Any:  # TinyMLP stays importable without importing torch with this module
    if name == "TinyMLP":
        return _tiny_mlp_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _tiny_mlp_sha256() -> str:
    """TinyMLP's identity: a hash of its definition (the marked part of this file)."""
    text = Path(__file__).read_text(encoding="utf-8")
    start = text.index("# --- TinyMLP: the default workload")
    end = text.index("# --- end of TinyMLP", start)
    return hashlib.sha256(b"TinyMLP\n" + text[start:end].encode()).hexdigest()


# --- compute content -----------------------------------------------------------------------------------
# The families whose work is counted in FLOPs (multiply-adds x 2): what every tool that runs the model
# shares, however it names, fuses or decomposes the ops.
FLOP_FAMILIES = frozenset({"matmul", "attention", "conv", "recurrent"})


@dataclass(frozen=True)
class FlopCount:
    """FLOPs of one forward per family, from torch's FLOP counter formulas, and the ops of a FLOP family
    that ran without a formula (their family's total is then a lower bound, not a count)."""

    per_family: dict[str, float]
    uncounted: dict[str, int] = field(default_factory=dict)  # aten op -> calls without a formula

    def uncounted_in(self, families: frozenset[str] | set[str]) -> list[str]:
        from common.analyze.families import op_family

        return sorted(op for op in self.uncounted if op_family(op) in families)


def _mha_flops(query, key, value, embed_dim, *_) -> int:
    """torch's fused multi-head attention (nn.MultiheadAttention's inference fast path), which torch's FLOP
    counter has no formula for: the q, k, v and output projections and the two attention products."""
    b, lq, e = query.shape
    lk = key.shape[1]
    return 2 * b * e * e * (2 * lq + 2 * lk) + 4 * b * lq * lk * e


def _encoder_layer_flops(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu,
                         norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1,
                         *_) -> int:
    """torch's fused encoder layer (nn.TransformerEncoderLayer's inference fast path): self-attention as
    above, then the feed-forward block's two matrix products."""
    tokens = src.shape[0] * src.shape[1] if src.dim() == 3 else src.shape[0]
    return _mha_flops(src, src, src, embed_dim) + 4 * tokens * ffn_weight_1.shape[0] * ffn_weight_1.shape[1]


def _rnn_layer_flops(x, weight_ih, weight_hh, *_) -> int:
    """One direction of one LSTM layer as the CPU runs it (``aten::mkldnn_rnn_layer``), which torch's FLOP
    counter has no formula for: every time step's input and hidden projections into the gates."""
    tokens = x.numel() // x.shape[-1]
    return 2 * tokens * weight_ih.shape[0] * (weight_ih.shape[1] + weight_hh.shape[1])


def count_flops(model, inputs: tuple) -> FlopCount:
    """Run one no-grad forward and add up the FLOPs of every op torch's FLOP counter has a formula for
    (``torch.utils.flop_counter``: mm, addmm, bmm, baddbmm, convolution of every kind, the fused
    attention kernels). CPU's flash attention kernel is counted with the flash formula, torch's fused
    multi-head attention, encoder layer and LSTM layer by hand (below); GRU and RNN layers run as
    matrix products the counter sees. An op of a FLOP family without a formula is listed in ``uncounted``."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    from common.analyze.families import op_family

    aliases = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu:
               torch.ops.aten._scaled_dot_product_flash_attention}
    by_hand = {torch.ops.aten._native_multi_head_attention: _mha_flops,
               torch.ops.aten._transformer_encoder_layer_fwd: _encoder_layer_flops,
               torch.ops.aten.mkldnn_rnn_layer: _rnn_layer_flops}
    per_family: Counter[str] = Counter()
    uncounted: Counter[str] = Counter()

    class _Flops(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            packet = func.overloadpacket
            formula = flop_registry.get(aliases.get(packet, packet))
            name = f"{func.namespace}::{packet.__name__}"
            family = op_family(name)
            try:
                if formula is not None:
                    per_family[family] += formula(*args, **kwargs, out_val=out)
                elif packet in by_hand:
                    per_family[family] += by_hand[packet](*args)
                elif family in FLOP_FAMILIES:
                    uncounted[name] += 1
            except (TypeError, ValueError, IndexError, AttributeError):  # arguments a formula does not expect
                uncounted[name] += 1
            return out

    with torch.no_grad(), _Flops():
        model(*inputs)
    return FlopCount({f: float(n) for f, n in per_family.items()}, dict(uncounted))


# --- outputs ---------------------------------------------------------------------------------------------
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


def _arrays(output) -> list[np.ndarray]:
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

    outs, refs = _arrays(output), _arrays(reference)
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


# --- the Workload ---------------------------------------------------------------------------------------
@dataclass(eq=False)
class Workload:
    """One model to profile: how to build it and its input, its reference output and its FLOPs."""

    name: str
    path: str | None  # the workload file; None for the built-in TinyMLP
    sha256: str  # of the file's bytes (TinyMLP: of its definition)
    _build: Callable[[], Any] = field(repr=False)
    _make_input: Callable[[], Any] = field(repr=False)
    loss: Callable[[Any, Any], Any] | None = field(default=None, repr=False)
    expectations: dict[str, Any] = field(default_factory=dict)
    _reference: tuple[np.ndarray, ...] | None = field(default=None, repr=False)
    _flops: FlopCount | None = field(default=None, repr=False)
    _precision: str | None = field(default=None, repr=False)
    _fp32_reference: tuple[np.ndarray, ...] | None = field(default=None, repr=False)
    _read: set = field(default_factory=set, repr=False)  # the files its import and forward read (cache.Watch)
    _kept: _Record | None = field(default=None, repr=False)  # its record in .lab_cache, once there is one
    _inputs_desc: str | None = field(default=None, repr=False)  # "(32, 1024) float32": make_input()'s tensors
    _fp32_inputs: tuple[np.ndarray, ...] | None = field(default=None, repr=False)  # as fp32_input_arrays()
    _parameters: list[str] | None = field(default=None, repr=False)  # forward()'s positional parameter names

    @property
    def where(self) -> str:
        return f"workload file {self.path}" if self.path else f"the built-in {self.name}"

    def info(self) -> dict[str, Any]:
        """What run_info.json records about the workload."""
        return {"name": self.name, "path": self.path, "sha256": self.sha256}

    def build_model(self):
        """The model with its random initialisation fixed by ``SEED``, in eval mode."""
        import torch

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(SEED)
            model = self._build()
        if not isinstance(model, torch.nn.Module):
            raise LabError(f"{self.where}: build_model() returned {type(model).__name__}, not a torch.nn.Module",
                           "make build_model() return the model (an nn.Module instance)")
        return model.eval()

    def make_input(self):
        """The fixed input: a tensor, or a tuple of tensors passed as separate arguments."""
        import torch

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(SEED + 1)
            x = self._make_input()
        items = tuple(x) if isinstance(x, (tuple, list)) else (x,)
        if not items or not all(isinstance(t, torch.Tensor) for t in items):
            raise LabError(f"{self.where}: make_input() returned {_kinds(x)}, not a tensor or a tuple of tensors",
                           "make make_input() return the model's input: a torch.Tensor, or a tuple of them")
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
                self._fp32_reference = tuple(_arrays(model(*x)))
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

    def forward_flops(self) -> FlopCount:
        """FLOPs of one forward per family (see :func:`count_flops`); computed once, kept with the record."""
        if self._flops is None:
            self._flops = count_flops(self.build_model(), self.inputs())
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
        return (f"workload {self.name} ({self.where}): input {self._inputs_desc}; output {outputs}; {self.precision}; "
                f"loss {'defined' if self.loss else 'not defined'}")

    def not_applicable(self, key: str) -> str:
        """Why a lesson check has nothing to compare with when the workload declares no EXPECT[key]."""
        return f"not applicable: {self.name} declares no EXPECT[{key!r}]"

    def _reference_arrays(self) -> tuple[np.ndarray, ...]:
        if self._reference is None and not _Record.restore(self):
            with cache.Watch() as read:
                self._reference = tuple(_arrays(self._checked_forward()))
            self._read |= read.files
            _Record.create(self)
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
                raise LabError(f"{self.where}: forward() failed at {line} on the input of make_input() (shapes "
                               f"{shapes}): {_first_line(err)}",
                               "fix the model's code there, or make make_input() return what forward() takes "
                               "(a tuple is passed as separate arguments)") from None
            raise LabError(f"{self.where}: the model rejects the input of make_input() (shapes {shapes}): "
                           f"{_first_line(err)}",
                           "make make_input() return what forward() takes (a tuple is passed as separate "
                           "arguments)") from None
        finally:
            torch.set_num_threads(threads)
        items = flatten_output(out)
        if not items or not all(isinstance(t, torch.Tensor) for t in items):
            raise LabError(f"{self.where}: the model returned {_kinds(out)}, not tensors",
                           "make forward() return a tensor, or a tuple, list, dict or dataclass of tensors "
                           "(docs/own_model.md)")
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
                raise LabError(f"{self.where}: loss(output, input) failed: {_first_line(err)}",
                               "make loss() take the model's output and make_input()'s value") from None
            if not isinstance(value, torch.Tensor) or value.numel() != 1:
                raise LabError(f"{self.where}: loss(output, input) returned {_describe(value)}, not a scalar tensor",
                               "make loss() return one number as a tensor (e.g. a .mean())")
        return out


class _Record:
    """A workload's results kept in .lab_cache (common.cache): its reference output, precision, input shapes,
    and once computed its FLOPs and fp32 reference. Valid while the workload file, every file its import and
    forward read, this module and the toolchain are unchanged; a run that finds it valid skips the forward,
    and a process that needs nothing else never imports torch."""

    KIND = "workload"

    def __init__(self, key: str, inputs: dict[str, Any]) -> None:
        self.key, self.inputs = key, inputs

    @staticmethod
    def key_of(path: str | None, name: str, sha: str) -> str:
        return f"{path or name}|{sha}"

    @staticmethod
    def extra() -> dict[str, Any]:
        return {"lab": cache.sha256_of(Path(__file__))}  # this module computes the reference and the FLOPs

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
    def restore(cls, work: Workload, found: dict[str, Any] | None = None) -> bool:
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
    def create(cls, work: Workload) -> None:
        """Record ``work`` after its checked forward, with the files it read."""
        read = work._read | ({Path(work.path)} if work.path else set())
        work._kept = cls(cls.key_of(work.path, work.name, work.sha256), cache.inputs_of(read, cls.extra()))
        work._kept.keep(work)

    def keep(self, work: Workload) -> None:
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
        cache.save(self.KIND, self.key, self.inputs, {
            "name": work.name, "path": work.path, "sha256": work.sha256, "precision": work._precision,
            "inputs": work._inputs_desc, "n_inputs": len(work._fp32_inputs or ()), "parameters": work._parameters,
            "outputs": len(work._reference),
            "fp32_outputs": len(work._fp32_reference or ()), "expectations": work.expectations,
            "has_loss": work.loss is not None,
            "flops": {"per_family": flops.per_family, "uncounted": flops.uncounted} if flops else None})


def _user_line(err: BaseException, path: str | None) -> str | None:
    """``file:line (function)`` of the last frame of the traceback in the workload file, if any."""
    import traceback

    if path is None:
        return None
    frames = [f for f in traceback.extract_tb(err.__traceback__) if Path(f.filename).resolve() == Path(path)]
    return f"{path}:{frames[-1].lineno} ({frames[-1].name})" if frames else None


def _first_line(err: BaseException) -> str:
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


@functools.cache
def tiny_mlp() -> Workload:
    """The default workload."""
    return Workload("TinyMLP", None, _tiny_mlp_sha256(), build_model, make_input, None, dict(TINY_MLP_EXPECT))


# --- loading a workload file --------------------------------------------------------------------------
_LOADED: dict[tuple[str, str], Workload] = {}


def _workload_file(path: str | os.PathLike | None) -> tuple[Path, str] | None:
    """The workload file of ``path``, else of $MSPROF_LAB_WORKLOAD (resolved) and its sha256; None: TinyMLP."""
    origin = ""
    if path is None or str(path) == "":
        path = os.environ.get(ENV_VAR) or None
        origin = f" (from {ENV_VAR})"
    if path is None:
        return None
    file = Path(path).expanduser()
    if not file.is_absolute():  # from the current directory, and the message says where that led
        origin += f" (looked for {file.resolve()})"
    if not file.exists():
        raise LabError(f"workload file {file}{origin} does not exist",
                       f"pass the path of a Python file that defines build_model() and make_input(); {_HELP}")
    if not file.is_file():
        raise LabError(f"workload file {file}{origin} is not a file",
                       f"pass the path of a Python file that defines build_model() and make_input(); {_HELP}")
    try:
        data = file.read_bytes()
    except OSError as err:
        raise LabError(f"workload file {file}{origin} cannot be read: {err.strerror}",
                       "check its permissions") from None
    return file.resolve(), hashlib.sha256(data).hexdigest()


def workload_identity(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """``{name, path, sha256}`` of the workload :func:`load_workload` would load, without importing it
    (a mode that profiles something else records which workload the run was given)."""
    found = _workload_file(path)
    if found is None:
        return tiny_mlp().info()
    resolved, sha = found
    return {"name": resolved.stem, "path": str(resolved), "sha256": sha}


def load_workload(path: str | os.PathLike | None = None, *, check: bool = True) -> Workload:
    """The workload of ``path``, else of $MSPROF_LAB_WORKLOAD, else TinyMLP; loaded once per file content.

    Loading imports the file, builds the model and runs one forward on its input, so every mistake
    shows here, before any output folder is touched. ``check=False`` skips that forward (a profiled
    program whose file the lab checked already: the forward would be profiled too).
    """
    found = _workload_file(path)
    if found is None:
        return tiny_mlp()
    resolved, sha = found
    key = (str(resolved), sha)
    if key not in _LOADED:
        workload = _restored(resolved, sha)  # checked before and unchanged since: nothing to import yet
        if workload is None:
            with cache.Watch() as read:
                workload = _from_module(_import(resolved, sha), resolved, sha)
            workload._read |= read.files
            if not check:
                return workload
            workload._reference_arrays()  # the forward that checks the model accepts its input
        _LOADED[key] = workload
    return _LOADED[key]


def _restored(file: Path, sha: str) -> Workload | None:
    """The workload of ``file`` from its valid record: the file is imported only when the model is built."""
    found = _Record.find(str(file), file.stem, sha)
    if found is None:
        return None
    module = functools.cache(lambda: _import(file, sha))
    result = found["result"]
    loss = (lambda output, x: module().loss(output, x)) if result.get("has_loss") else None
    work = Workload(file.stem, str(file), sha, _guard(lambda: module().build_model(), file, "build_model"),
                    _guard(lambda: module().make_input(), file, "make_input"), loss, dict(result["expectations"]))
    _Record.restore(work, found)
    return work


def _import(file: Path, sha: str):
    """Import the file as a module of its own (never through a shell); its folder joins sys.path's end."""
    name = f"msprof_lab_workload_{sha[:16]}"
    loader = importlib.machinery.SourceFileLoader(name, str(file))
    spec = importlib.util.spec_from_file_location(name, file, loader=loader)
    module = importlib.util.module_from_spec(spec)
    if str(file.parent) not in sys.path:
        sys.path.append(str(file.parent))  # so that it can import the modules next to it
    sys.modules[name] = module  # dataclasses and pickling look their module up here
    try:
        loader.exec_module(module)
    except SyntaxError as err:
        sys.modules.pop(name, None)
        raise LabError(f"workload file {file}: syntax error at line {err.lineno}: {err.msg}",
                       "fix the Python syntax in that file") from None
    except ImportError as err:
        sys.modules.pop(name, None)
        raise LabError(f"workload file {file}: an import failed: {_first_line(err)}",
                       "install the missing package in this environment or fix the import") from None
    except (Exception, SystemExit) as err:  # noqa: BLE001 (the user's code, run at import)
        sys.modules.pop(name, None)
        raise LabError(f"workload file {file}: running it failed: {_first_line(err)}",
                       "fix the code at its top level (it runs when the lab imports the file)") from None
    return module


def _from_module(module, file: Path, sha: str) -> Workload:
    missing = [f for f in ("build_model", "make_input") if not callable(getattr(module, f, None))]
    if missing:
        raise LabError(f"workload file {file} defines no {' and no '.join(f + '()' for f in missing)}",
                       f"add def build_model() returning the nn.Module and def make_input() returning its input; "
                       f"{_HELP}")
    loss = getattr(module, "loss", None)
    if loss is not None and not callable(loss):
        raise LabError(f"workload file {file}: loss is not a function but {type(loss).__name__}",
                       "define loss(output, input) returning a scalar tensor, or remove it")
    expect = _expectations(getattr(module, "EXPECT", {}), file)
    return Workload(file.stem, str(file), sha, _guard(module.build_model, file, "build_model"),
                    _guard(module.make_input, file, "make_input"), loss, expect)


def _guard(func: Callable[[], Any], file: Path, what: str) -> Callable[[], Any]:
    """``func()`` with any failure raised as a LabError naming the file."""

    def call():
        try:
            return func()
        except LabError:
            raise
        except Exception as err:  # noqa: BLE001 (the user's code)
            raise LabError(f"workload file {file}: {what}() failed: {_first_line(err)}",
                           f"fix {what}() in that file (it is called with no arguments)") from None

    return call


def _expectations(expect: Any, file: Path) -> dict[str, Any]:
    from common.analyze.families import FAMILY_ORDER

    if not isinstance(expect, dict):
        raise LabError(f"workload file {file}: EXPECT is a {type(expect).__name__}, not a dict",
                       f"write EXPECT = {{...}} with keys among {', '.join(EXPECT_KEYS)}")
    for key, value in expect.items():
        if key not in EXPECT_KEYS:
            raise LabError(f"workload file {file}: EXPECT has an unknown key {key!r}",
                           f"use keys among {', '.join(EXPECT_KEYS)}")
        kind = EXPECT_KEYS[key]
        if not isinstance(value, kind):
            raise LabError(f"workload file {file}: EXPECT[{key!r}] is {value!r}, not a {kind.__name__}",
                           f"give EXPECT[{key!r}] a {kind.__name__} value")
        if kind is str and value not in FAMILY_ORDER:
            raise LabError(f"workload file {file}: EXPECT[{key!r}] names no op family: {value!r}",
                           f"use one of {', '.join(FAMILY_ORDER)}")
    return dict(expect)


# --- threads ----------------------------------------------------------------------------------------------
def use_threads(n: int = 1) -> int:
    """Set torch's intra-op thread count (portable backend); returns the count now in use."""
    import torch

    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise LabError(f"thread count {n!r} is not a positive integer", "pass 1 or more")
    torch.set_num_threads(n)
    return torch.get_num_threads()


# --- the default workload's functions, as the modes call them -----------------------------------------
def reference_output() -> np.ndarray:
    """TinyMLP's fp32 CPU output on its input, computed once per process (a copy)."""
    return tiny_mlp().reference_output()


def compare_to_reference(output, reference=None) -> dict[str, float]:
    """Max abs diff, mean abs diff and cosine of an output against ``reference`` (default: TinyMLP's)."""
    return compare_outputs(output, tiny_mlp()._reference_arrays() if reference is None else reference)
