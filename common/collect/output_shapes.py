"""Output Shapes for the portable backend's tasks, as msprof's op_summary lists them for every kernel.

torch.profiler records an op's inputs (the shapes of its tensors, the values of its scalar arguments:
``concrete_inputs``), not its outputs. A convolution's or a pooling's output size depends on stride,
padding and dilation, which are scalar arguments, and an RNN's on ``bidirectional``: the bounds table
(``common.analyze.bounds.op``) needs those output shapes to count the work. They are derived here from
the recorded inputs with torch's own shape functions: the op run on meta tensors (no data, no
arithmetic). Only the families whose work needs them get Output Shapes; every other task keeps N/A.
"""

from __future__ import annotations

import functools
import json

from common.analyze.families import op_family

# Families whose work model needs the output's shape (see the module docstring).
FAMILIES = frozenset({"conv", "pool", "resize", "recurrent"})

# torch.profiler's dtype names (input_dtypes) -> torch dtype attribute names
_TORCH_DTYPES = {
    "float": "float32",
    "c10::Half": "float16",
    "c10::BFloat16": "bfloat16",
    "double": "float64",
    "long int": "int64",
    "int": "int32",
    "bool": "bool",
    "signed char": "int8",
    "unsigned char": "uint8",
    "short int": "int16",
}
# torch dtype -> the name msprof writes in Output Data Types (as torch_ops does for the inputs)
_MSPROF_DTYPES = {
    "float32": "FLOAT",
    "float16": "FLOAT16",
    "bfloat16": "DT_BF16",
    "float64": "DOUBLE",
    "int64": "INT64",
    "int32": "INT32",
    "bool": "BOOL",
    "int8": "INT8",
    "uint8": "UINT8",
    "int16": "INT16",
}
_SCALARS = ("Scalar", "ScalarList")


def json_safe(values) -> list:
    """``concrete_inputs`` as JSON values (ints, floats, bools, strings, None and lists of them); others None."""

    def one(v):
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, (list, tuple)) and all(x is None or isinstance(x, (bool, int, float, str)) for x in v):
            return list(v)
        return None

    return [one(v) for v in (values or [])]


def output_shapes(name: str, shapes: list, dtypes: list, concrete: list) -> tuple[str, str] | None:
    """(Output Shapes, Output Data Types) in msprof's notation for an op of :data:`FAMILIES`, else None."""
    if op_family(name) not in FAMILIES or not name.startswith("aten::") or not concrete:
        return None
    try:
        key = json.dumps([name, [list(s) for s in shapes], list(dtypes), json_safe(concrete)])
    except (TypeError, ValueError):
        return None
    return _cached(key)


@functools.lru_cache(maxsize=1024)
def _cached(key: str) -> tuple[str, str] | None:
    name, shapes, dtypes, concrete = json.loads(key)
    try:
        outs = _meta_outputs(name, shapes, dtypes, concrete)
    except Exception:  # noqa: BLE001 (an op without a meta kernel, an argument we cannot rebuild: N/A)
        outs = None
    if not outs:
        return None
    return (";".join(",".join(map(str, s)) for s, _ in outs), ";".join(d for _, d in outs))


def _meta_outputs(name: str, shapes, dtypes, concrete) -> list[tuple[tuple[int, ...], str]] | None:
    import torch

    packet = getattr(torch.ops.aten, name[len("aten::") :], None)
    if packet is None:
        return None
    for overload in packet.overloads():
        schema = getattr(packet, overload)._schema
        args = schema.arguments
        if len(args) != len(dtypes) or any(a.is_out for a in args):
            continue
        bound = _bind(torch, args, shapes, dtypes, concrete)
        if bound is None:
            continue
        positional, keywords = bound
        attempts = (_rnn, _own) if op_family(name) == "recurrent" else (_own, _convolution)
        for attempt in attempts:
            try:
                outs = attempt(torch, name, getattr(packet, overload), args, positional, keywords)
            except Exception:  # noqa: BLE001 (no meta kernel for this op: try the next way)
                continue
            if outs:
                return outs
    return None


def _bind(torch, args, shapes, dtypes, concrete):
    """The recorded arguments, in schema order: tensors as meta tensors of their shape, scalars as recorded."""
    positional, keywords = [], {}
    for arg, shape, dtype, value in zip(args, shapes, dtypes, concrete + [None] * (len(args) - len(concrete))):
        if dtype in _TORCH_DTYPES:
            v = torch.empty(shape, dtype=getattr(torch, _TORCH_DTYPES[dtype]), device="meta")
        elif dtype in _SCALARS:
            v = value
        elif dtype == "":
            v = None
        elif dtype == "TensorList":
            v = []  # torch records no shapes for a list of tensors: rebuilt empty (_rnn reads none of it)
        else:
            return None
        if arg.kwarg_only:
            keywords[arg.name] = v
        else:
            positional.append(v)
    return positional, keywords


def _tensors(torch, out) -> list[tuple[tuple[int, ...], str]]:
    outs = out if isinstance(out, (tuple, list)) else [out]
    found = []
    for o in outs:
        if isinstance(o, torch.Tensor):
            dtype = str(o.dtype).removeprefix("torch.")
            found.append((tuple(o.shape), _MSPROF_DTYPES.get(dtype, dtype.upper())))
    return found


def _own(torch, name, op, args, positional, keywords):
    """The op itself on meta tensors: its own shape function (pooling, upsampling, most convolutions)."""
    return _tensors(torch, op(*positional, **keywords))


def _convolution(torch, name, op, args, positional, keywords):
    """A convolution kernel without a meta implementation (aten::mkldnn_convolution, _slow_conv2d_forward):
    its arguments, by name, through aten::convolution's shape function."""
    if op_family(name) != "conv":
        return None
    values = dict(zip([a.name for a in args if not a.kwarg_only], positional)) | keywords
    x = values.get("input", values.get("self"))
    w = values["weight"]
    n = x.dim() - 2

    def listed(key, default):
        v = values.get(key)
        return [default] * n if v is None else list(v) if isinstance(v, (list, tuple)) else [v] * n

    out = torch.ops.aten.convolution(
        x,
        w,
        values.get("bias"),
        listed("stride", 1),
        listed("padding", 0),
        listed("dilation", 1),
        bool(values.get("transposed", False)),
        listed("output_padding", 0),
        int(values.get("groups") or 1),
    )
    return _tensors(torch, out)


def _rnn(torch, name, op, args, positional, keywords):
    """aten::gru / rnn_tanh / rnn_relu (input, hx, params[] ...): torch records no shapes for the weights, so the
    meta op cannot run; the output is the input with its last dimension D*H (D = 2 when bidirectional), then
    h_n, the shape of hx."""
    if op_family(name) != "recurrent":
        return None
    values = dict(zip([a.name for a in args if not a.kwarg_only], positional)) | keywords
    x, hx = values.get("input", values.get("data")), values.get("hx")
    if not isinstance(hx, torch.Tensor) or "bidirectional" not in values or x is None or x.dim() != 3:
        return None
    directions = 2 if values["bidirectional"] else 1
    dtype = _MSPROF_DTYPES.get(str(x.dtype).removeprefix("torch."), "FLOAT")
    return [((*x.shape[:-1], directions * hx.shape[-1]), dtype), (tuple(hx.shape), dtype)]
