"""Each op's output as each path runs it, and the fp32 reference of the same op (``python -m common precision``).

- torch (what modes 01 and 04 run): a forward hook on every leaf module records its output, on the CPU
  or an NPU alike; the model runs in the workload's own precision and, as a second candidate, in fp16.
- mode 03's variants, portable: every node output of the built ``.opt.onnx`` is made a graph output of a
  copy, ONNX Runtime runs it once, and each leaf module's output is the output of its last node, found by
  the scope in node names (``/model/net/net.0/Gemm`` is ``net.0``: the TorchScript exporter writes them, and 03's
  harness names a dynamo-exported graph's nodes the same way).
- mode 03's variants, NPU: the lesson infer.py runs each .om once with the ``dump`` block in acl.init's JSON
  (:func:`acl_dump_config`), ``msaccucmp.py convert`` turns the dump into .npy files, and each leaf module's output
  is the dumped op its last ONNX node names (:func:`dump_op_outputs`, docs/precision.md).

Which models and inputs mode 03 has is the harness's to say: ``common.modes.pyacl.precision``.

The reference is always the workload's fp32 copy (``Workload.fp32_copy``) on the CPU, hooked the same way.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from common.analyze.precision import OpOutput
from common.errors import LabError
from common.workload import Workload, flatten_output

EXPORT_WRAPPER = "model"  # 03's lesson export_onnx.py wraps the model in a module whose attribute is ``model``
FP16_HOW = (
    ".half(): every weight and activation in fp16, as 03's fp16 variants convert the graph; autocast would "
    "keep the ops on its fp32 list (softmax, norms, losses) in fp32, and its lists differ between CPU and NPU"
)


# ----- torch: forward hooks on every leaf module ----------------------------------------------------
def computes(module) -> str:
    """What a module computes, as torch prints it: ``Linear(in_features=1024, out_features=1024, bias=True)``."""
    extra = module.extra_repr()
    return f"{type(module).__name__}({extra})" if extra else type(module).__name__


def _leaves(model) -> list[tuple[str, object]]:
    """(path, module) of every leaf module (one without children) in definition order; a model without children is
    its own leaf, named after its class."""
    found = [(name, m) for name, m in model.named_modules() if name and not any(m.children())]
    return found or [(type(model).__name__, model)]


def leaf_modules(model) -> dict[str, str]:
    """Every leaf module by its path in ``model``, with what it computes, in definition order (:func:`_leaves`)."""
    return {name: computes(m) for name, m in _leaves(model)}


def torch_op_outputs(model, inputs: tuple) -> list[OpOutput]:
    """Run ``model(*inputs)`` once without gradients; each leaf module's first output tensor, in the order the
    modules ran, as fp32 arrays. A module that runs twice gives ``path#2`` for its second call."""
    import torch

    found: list[OpOutput] = []
    calls: dict[str, int] = {}

    def hook_for(name: str, module):
        def hook(_module, _args, output):
            tensors = [t for t in flatten_output(output) if isinstance(t, torch.Tensor) and t.is_floating_point()]
            calls[name] = calls.get(name, 0) + 1
            path = name if calls[name] == 1 else f"{name}#{calls[name]}"
            # a copy, taken now: .float() and .cpu() return the tensor itself when it is fp32 on the CPU, and an
            # in-place op after this module (ReLU(inplace=True), Hardswish(inplace=True)) would rewrite it
            array = tensors[0].detach().to("cpu", torch.float32, copy=True).numpy() if tensors else None
            found.append(OpOutput(path, computes(module), array))

        return hook

    handles = [m.register_forward_hook(hook_for(name, m)) for name, m in _leaves(model)]
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for h in handles:
            h.remove()
    return found


def reference_outputs(work: Workload) -> dict[str, np.ndarray]:
    """Each leaf module's output in the workload's fp32 copy on the CPU: the reference of every candidate."""
    model, x = work.fp32_copy()
    return {op.path: op.array for op in torch_op_outputs(model, x) if op.array is not None}


def torch_candidates(work: Workload, device: str = "cpu") -> list[tuple[str, str, str, list[OpOutput]]]:
    """(name, how it ran, precision, per-op outputs) of the torch paths: the model in its own precision, then in
    fp16 (unless it is fp16 already), on ``device`` (``cpu`` or ``npu:<n>``)."""
    model, x = work.build_model(), work.inputs()
    out = [
        (
            f"torch {work.precision}",
            f"the workload's model as built, on {device}",
            work.precision,
            torch_op_outputs(model.to(device), tuple(t.to(device) for t in x)),
        )
    ]
    if work.precision != "fp16":
        model, x = work.fp32_copy()
        x = tuple((t.half() if t.is_floating_point() else t).to(device) for t in x)
        out.append(
            (
                "torch fp16",
                f"the fp32 copy, {FP16_HOW}; on {device}",
                "fp16",
                torch_op_outputs(model.half().to(device), x),
            )
        )
    return out


# ----- mode 03, portable: ONNX Runtime with every intermediate exposed -------------------------------
def scope_path(name: str) -> str | None:
    """The module path a TorchScript-exported node name or value name holds, without the export's wrapper:
    ``/model/blocks/blocks.0/act/Erf`` is ``blocks.0.act``; ``InsertedPrecisionFreeCast_/model/net/net.0/Gemm_output_0``
    (a name ONNX Runtime's fp16 conversion derived) is ``net.0``; a name without a scope is None."""
    at = name.find("/")
    if at < 0:
        return None
    segments = [s for s in name[at:].split("/") if s][:-1]  # the last one is the op (or the value)
    path: list[str] = []
    for seg in segments:
        if path and seg.startswith(path[-1] + "."):  # a container's child: "net" then "net.0"
            path[-1] = seg
        else:
            path.append(seg)
    if path[:1] == [EXPORT_WRAPPER]:
        path = path[1:]
    return ".".join(path) or None


def node_module(node, leaves: dict[str, str]) -> str | None:
    """The leaf module a node belongs to: by its name's scope, else by its outputs' (a node that ONNX Runtime fused
    is named ``Gelu`` but keeps the output name ``/model/net/net.1/Mul_1_output_0``)."""
    for name in (node.name, *node.output):
        path = scope_path(name)
        if path in leaves:
            return path
    return None


def module_outputs(exported, leaves: dict[str, str]) -> dict[str, str | None]:
    """Each leaf module's output value in the exported graph (the output of its last node there), in graph order.

    An exporter folds an eval-mode BatchNorm into the Conv before it (TorchScript's eval peephole names the Conv
    after the conv module; the dynamo exporter's optimizer after the BatchNorm): a BatchNorm without a node of its
    own, right after a module that has one, takes that module's value, which then is the BatchNorm's output; the
    module before it maps to None (it has no output of its own in the graph)."""
    last: dict[str, str] = {}
    for node in exported.graph.node:
        module = node_module(node, leaves)
        if module is not None and node.output:
            last.pop(module, None)
            last[module] = node.output[0]
    order = list(leaves)
    folded = {
        order[i - 1]: m
        for i, m in enumerate(order)
        if i and m not in last and leaves[m].startswith("BatchNorm") and order[i - 1] in last
    }
    found: dict[str, str | None] = {}
    for module, value in last.items():
        if module in folded:
            found[module], found[folded[module]] = None, value
        else:
            found[module] = value
    return found


def _same_value(name: str, exported_value: str) -> bool:
    """Whether a built graph's value is the exported value: the same name, or the name with a prefix a converter
    adds when it re-types the value (ONNX Runtime's ``InsertedPrecisionFreeCast_/model/...``)."""
    return name == exported_value or (
        "/" in exported_value and name.endswith(exported_value) and name[: -len(exported_value)].endswith("_")
    )


def fused_ops(
    producers: dict[str, tuple[int, str]], outputs: dict[str, str | None], where: str
) -> tuple[dict[str, tuple[tuple[str, ...], str, str]], list[str]]:
    """Where each leaf module's output is computed in a built graph: ``{module: (covers, value, producer)}`` for the
    modules whose exported output value the built graph still computes (``producers``: value -> (graph position,
    what computes it), the last producer of a renamed copy winning), in graph order; and one "not compared" line per
    module whose value a converter fused away with no later module's op to carry it.

    A converter that fuses ops (ONNX Runtime's FusedGemm, FusedConv; ATC's fusion passes) writes the value of the
    last op it fused, so a fused op is compared where the fusion ends: the modules whose values vanished before it
    are its ``covers``, and it is shown as ``a+b+c (fused as <op>)``. Never against a module whose output it is not.
    """
    found: dict[str, tuple[tuple[str, ...], str, str]] = {}
    vanished: list[str] = []
    for module, value in outputs.items():
        hits = sorted(
            (at, name, what) for name, (at, what) in producers.items() if value is not None and _same_value(name, value)
        )
        if not hits:
            vanished.append(module)
            continue
        _, name, what = hits[-1]
        found[module] = (tuple(vanished), name, what)
        vanished = []
    lines = [
        f"{m} not compared: its output ({outputs[m] or 'folded by the exporter'}) is not in {where} and no "
        "later module's op computes past it (a converter fused it into an op whose output no leaf module has)"
        for m in vanished
    ]
    return found, lines


def onnx_op_outputs(
    path: Path, feeds: dict[str, np.ndarray], leaves: dict[str, str], exported: Path
) -> tuple[list[OpOutput], list[str]]:
    """Each leaf module's output as ONNX Runtime computes it in the built model at ``path``: the value the module's
    last node writes in the ``exported`` graph (:func:`module_outputs`), made a graph output of a copy, in graph
    order; a module ONNX Runtime fused into a later one is compared with it, where the fusion ends (:func:`fused_ops`).
    And one line per op type of the nodes no leaf module matches, and per module not compared.
    Nodes whose inputs are all weights or constants are left out: they compute no activation."""
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(path))
    producers: dict[str, tuple[int, str]] = {}
    unmatched: dict[str, list[str]] = {}
    types: dict[str, list[str]] = {}
    static = {t.name for t in model.graph.initializer}  # values computed from weights and constants only
    on_constants = 0
    for i, node in enumerate(model.graph.node):
        if node.op_type == "Constant" or all(name in static for name in node.input if name):
            static.update(node.output)  # a weight's Cast, a folded constant: no activation passes through it
            on_constants += node.op_type != "Constant"
            continue
        if node.output and node.output[0]:
            producers[node.output[0]] = (i, node.op_type)
        module = node_module(node, leaves)
        if module is None:
            unmatched.setdefault(node.op_type, []).append(node.name or node.output[0])
        else:
            types.setdefault(module, []).append(node.op_type)
    exported_outputs = module_outputs(onnx.load(str(exported), load_external_data=False), leaves)
    found, not_compared = fused_ops(producers, exported_outputs, f"the built graph {path.name}")
    not_compared += [
        f"{m} ({what}) not compared: no node of the exported graph belongs to it (the exporter folded it "
        "into a later module's op, as Conv+BatchNorm, or it computes nothing, as Dropout in eval)"
        for m, what in leaves.items()
        if m not in exported_outputs
    ]
    existing = {o.name for o in model.graph.output}
    model.graph.output.extend(onnx.ValueInfoProto(name=name) for _, name, _ in found.values() if name not in existing)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the nodes as the file has them
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [name for _, name, _ in found.values()]
    arrays = dict(zip(names, session.run(names, feeds)))
    outputs = []
    for module, (covers, name, what) in found.items():
        how = f"fused as {what}" if covers else f"{leaves[module]} as ONNX {', '.join(types.get(module, [what]))}"
        outputs.append(OpOutput(module, how, arrays[name].astype(np.float32), covers))
    lines = [f"{len(names)} {op} node(s) outside every leaf module, e.g. {names[0]}" for op, names in unmatched.items()]
    if on_constants:
        lines.append(
            f"{on_constants} node(s) on weights and constants only (the converter's casts of weights): "
            "no activation passes through them, left out"
        )
    return outputs, lines + not_compared


# ----- NPU, mode 03: the ACL dump -------------------------------------------------------------------
PRECISION_FREE_CAST = "InsertedPrecisionFreeCast_"  # how ONNX Runtime names the Casts it puts around an fp32 island
FLOAT = 1  # onnx.TensorProto.FLOAT: a Cast "to" fp32 starts the island, one back to fp16 ends it


def cpu_fp32_ops(graph) -> dict[str, int]:
    """The op types (with counts) ONNX Runtime computes in fp32 in a graph built for fp16: its CPU provider has no
    fp16 kernel for them (Gemm, LayerNormalization, ...), so it casts their inputs up and their outputs back down
    (Casts named ``InsertedPrecisionFreeCast_...``). ``graph``: the built (``.opt.onnx``) model's GraphProto."""
    upcast = {
        out
        for node in graph.node
        if node.op_type == "Cast"
        and node.name.startswith(PRECISION_FREE_CAST)
        and any(a.name == "to" and a.i == FLOAT for a in node.attribute)
        for out in node.output
    }
    counts: dict[str, int] = {}
    for node in graph.node:
        if node.op_type != "Cast" and any(name in upcast for name in node.input):
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def cpu_fp32_note(counts: dict[str, int]) -> str:
    """What a variant's per-op table can and cannot show when ONNX Runtime ran some of its ops in fp32."""
    if not counts:
        return ""
    listed = ", ".join(f"{op} x{n}" for op, n in counts.items())
    return (
        f"; ONNX Runtime's CPU provider computes {sum(counts.values())} ops of it in fp32 ({listed}: no fp16 "
        "kernel, so it casts around them), so those ops show fp16 inputs and weights, not fp16 arithmetic "
        "(an overflow inside them shows only on the torch fp16 path here; an NPU computes them in fp16)"
    )


def acl_dump_config(dump_path: Path | str, model_name: str, layers: list[str] | None = None) -> dict:
    """The ``dump`` block of the JSON given to ``acl.init`` (docs/precision.md, ACL-DUMP): every op's output of the
    model ``model_name`` (the .om file's name without suffix), as tensors, into ``dump_path`` (which must exist)."""
    entry: dict = {"model_name": model_name}
    if layers:
        entry["layer"] = list(layers)
    return {
        "dump": {
            "dump_path": str(dump_path),
            "dump_list": [entry],
            "dump_mode": "output",
            "dump_op_switch": "off",
            "dump_data": "tensor",
        }
    }


def msaccucmp_convert_argv(python: str, msaccucmp: Path | str, dump_dir: Path | str, out_dir: Path | str) -> list[str]:
    """``msaccucmp.py convert`` of one folder of dump files into .npy files (MSACCUCMP-CONVERT)."""
    return [python, str(msaccucmp), "convert", "-d", str(dump_dir), "-out", str(out_dir), "-t", "npy"]


MSACCUCMP = Path("tools") / "operator_cmp" / "compare" / "msaccucmp.py"  # under CANN's install root (MSACCUCMP-CONVERT)
# A dump file's name (ACL-DUMP-DATA): {op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}, with ".", "/", "\\" and
# spaces in op_type and op_name replaced by "_"; converted, "<dump file name>.output.<index>.npy", or with a shape
# after the index, "<dump file name>.output.<index>.<shape>.npy", as CANN 8.0's converter may name it (MSACCUCMP-CONVERT).
CONVERTED = re.compile(r"^(?P<op_type>[^.]+)\.(?P<op_name>[^.]+)\..*\.output\.(?P<index>[0-9]+)(?:\.[^.]+)?\.npy$")


def dump_name(name: str) -> str:
    """``name`` as a dump file spells an op name: ".", "/", "\\" and spaces become "_"."""
    return re.sub(r"[./\\ ]", "_", name)


def dump_data_dir(dump_path: Path, model_name: str) -> Path:
    """The folder holding the dump files of the one model dumped into ``dump_path``:
    ``{dump_path}/{time}/{device}/{name}/{model_id}/{data_index}`` (ACL-DUMP-DATA), the newest when there are
    several. ``{name}`` is ``model_name`` (the .om's stem) or the name the model has inside the .om, which some CANN
    versions may write (ACL-DUMP-DATA); any name is taken, as CANN's own compare tools walk the tree, so
    ``dump_path`` must hold one model's dump only."""
    found = sorted((p for p in dump_path.glob("*/*/*/*/*") if p.is_dir()), key=lambda p: p.stat().st_mtime)
    if not found:
        raise LabError(
            f"the ACL dump wrote nothing for model {model_name} under {dump_path}",
            "read the worker's messages and the CANN logs in the logs/ folder beside it",
        )
    return found[-1]


def dump_op_outputs(npy_dir: Path, onnx_path: Path, leaves: dict[str, str]) -> tuple[list[OpOutput], list[str]]:
    """Each leaf module's output as the device computed it: the converted dump of the op named by the node that
    writes the module's output in the exported graph (the node's name, spelt as dumps spell it, is the op's name
    unless ATC fused or renamed it), in graph order; a module whose op ATC fused away is compared at the next
    module's op, where the fusion ends (:func:`fused_ops`). And one line per op type of the dumped ops no leaf
    module's node names, and per module not compared."""
    import onnx

    exported = onnx.load(str(onnx_path), load_external_data=False)
    nodes = {
        dump_name(node.name): (i, node.output[0])
        for i, node in enumerate(exported.graph.node)
        if node.name and node.output and node_module(node, leaves) is not None
    }
    producers: dict[str, tuple[int, str]] = {}
    files: dict[str, Path] = {}
    unmatched: dict[str, list[str]] = {}
    converted = sorted(npy_dir.glob("*.npy"))
    if not converted:
        raise LabError(f"msaccucmp.py convert wrote no .npy file into {npy_dir}", "read its messages above")
    for path in converted:
        found = CONVERTED.match(path.name)
        if found is None or found["index"] != "0":
            continue
        hit = nodes.get(found["op_name"])
        if hit is None:
            unmatched.setdefault(found["op_type"], []).append(found["op_name"])
        else:
            producers[hit[1]] = (hit[0], f"the device's {found['op_type']}")
            files[hit[1]] = path
    ops, not_compared = fused_ops(producers, module_outputs(exported, leaves), "the dump")
    outputs = [
        OpOutput(
            module,
            f"fused as {what}" if covers else f"{leaves[module]} as {what}",
            np.load(files[value]).astype(np.float32),
            covers,
        )
        for module, (covers, value, what) in ops.items()
    ]
    lines = [
        f"{len(names)} dumped {op} op(s) named by no node of a leaf module (ATC fused or renamed them), e.g. {names[0]}"
        for op, names in unmatched.items()
    ]
    return outputs, lines + not_compared
