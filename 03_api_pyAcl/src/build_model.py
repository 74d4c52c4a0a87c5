"""Build one offline model per precision variant from the exported ONNX file.

What you will do: export TinyMLP to ONNX, then convert it offline, once per variant:
with ATC into ``model/npu/tiny_mlp_<variant>.om`` on an NPU machine, or with ONNX Runtime
into ``model/portable/tiny_mlp_<variant>.opt.onnx`` anywhere else.

What you will learn:
- the offline converter, not your code, decides the precision: ATC's default policy computes
  in fp16 while the model's IO stays fp32, so it must insert Cast ops at the boundary;
- the two ways to remove those Casts (feed fp16 yourself, or keep fp32 compute) and that each
  is just a converter option;
- to count what the converter produced (ops by type in the built graph) before profiling it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for `common`

from export_onnx import OPSET, export
from variants import INPUT_NAME, ONNX_MODEL, Variant, parse_variants

from common.backend import Backend, detect, soc_version
from common.formats import rundir
from common.collect import npu_commands
from common.errors import ArgumentParser, LabError, run_cli
from common.workload import make_input

INPUT_SHAPE = list(make_input().shape)  # [32, 1024]: the model is built for the shared input
ATC_INPUT_SHAPE = f"{INPUT_NAME}:" + ",".join(map(str, INPUT_SHAPE))  # atc --input_shape, e.g. x:32,1024
# Ops that are graph plumbing, not work: they launch no kernel and are left out of the counts.
NON_COMPUTE_OPS = frozenset({"Constant", "Data", "NetOutput", "Const"})


# ----- reading a built graph ---------------------------------------------------------------------
def load_onnx(path: Path):
    """Load and check an ONNX file; a missing, corrupt or wrong-shape file is a usage error."""
    import onnx

    if not path.is_file():
        raise LabError(f"model file {path} not found", "build it first: bash 03_api_pyAcl/build_model.sh")
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except Exception as err:  # protobuf DecodeError, ValidationError, ...: all mean "not a usable file"
        raise LabError(
            f"{path} is not a valid ONNX model ({type(err).__name__})", "rebuild it: bash 03_api_pyAcl/build_model.sh"
        ) from None
    check_input_shape(
        path, [i.name for i in model.graph.input], _dims(model.graph.input[0]) if model.graph.input else []
    )
    return model


def _dims(value_info) -> list[int | str]:
    return [
        d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in value_info.type.tensor_type.shape.dim
    ]


def check_input_shape(path: Path, input_names: list[str], dims: list) -> None:
    """The lab's model has exactly one input ``x`` of shape [32, 1024]; anything else was built for another input."""
    if input_names != [INPUT_NAME] or list(dims) != INPUT_SHAPE:
        raise LabError(
            f"{path} takes {', '.join(input_names) or 'no input'} {list(dims)}, "
            f"but the lab feeds {INPUT_NAME}{INPUT_SHAPE}",
            "rebuild the model from common.workload: bash 03_api_pyAcl/build_model.sh",
        )


def onnx_op_counts(path: Path) -> Counter[str]:
    """Compute ops by type in an ONNX graph: what one execute of it runs."""
    return Counter(n.op_type for n in load_onnx(path).graph.node if n.op_type not in NON_COMPUTE_OPS)


def om_op_counts(json_path: Path) -> Counter[str]:
    """Compute ops by type in an om graph dumped by ``atc --mode=1``."""
    try:
        graphs = json.loads(json_path.read_text())["graph"]
    except (OSError, ValueError, KeyError) as err:
        raise LabError(
            f"{json_path}: cannot read the om graph dump ({err})", "rebuild: bash 03_api_pyAcl/build_model.sh"
        ) from None
    return Counter(op["type"] for g in graphs for op in g.get("op", []) if op.get("type") not in NON_COMPUTE_OPS)


# ----- portable: ONNX Runtime offline optimization -----------------------------------------------
def build_portable(variant: Variant, source: Path) -> Path:
    """Apply the variant's precision policy to ``source``, then let ONNX Runtime optimize and save it."""
    import onnx
    import onnxruntime as ort

    model = load_onnx(source)
    if variant.fp16_compute:
        from onnxruntime.transformers.float16 import convert_float_to_float16

        # The same policy as ATC's default: weights and ops become fp16. keep_io_types=True keeps
        # the model's input and output fp32, which is exactly what forces a Cast at each boundary.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "value truncated to fp16": expected here
            model = convert_float_to_float16(model, keep_io_types=variant.io_dtype == "float32")
    out = variant.portable_path()
    out.parent.mkdir(parents=True, exist_ok=True)
    converted = out.with_name(out.name.replace(".opt.onnx", ".converted.onnx"))
    onnx.save(model, str(converted))

    options = ort.SessionOptions()
    # EXTENDED: fusions (Gemm + GELU pattern -> Gelu) without the hardware-specific layout
    # changes of ALL, so the saved file is a plain graph that any CPU can run as saved.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(out)
    options.log_severity_level = 3  # errors only
    ort.InferenceSession(str(converted), options, providers=["CPUExecutionProvider"])
    converted.unlink()
    return out


# ----- npu: ATC ----------------------------------------------------------------------------------
def build_npu(variant: Variant, source: Path, backend: Backend) -> Path:
    """Run ATC for one variant, then dump the om graph to JSON so its ops can be counted."""
    atc = backend.tools.get("atc")
    if not atc:
        raise LabError("atc not found on PATH", "source CANN's set_env.sh (it puts atc on PATH)")
    variant.om_stem().parent.mkdir(parents=True, exist_ok=True)
    soc = soc_version(backend)  # never hard-coded: the .om only runs on the chip it was built for
    for argv in (
        npu_commands.atc_argv(atc, source, variant.om_stem(), soc, ATC_INPUT_SHAPE, variant.atc_options),
        npu_commands.atc_om_to_json_argv(atc, variant.om_path(), variant.om_json_path()),
    ):
        print("$ " + " ".join(argv), flush=True)
        code = subprocess.run(argv, check=False).returncode
        if code != 0:
            raise LabError(
                f"{Path(argv[0]).name} exited with {code} for variant {variant.name}", "read ATC's messages above"
            )
    return variant.om_path()


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variant", nargs="?", default="all", help="default, fp16-io, fp32 or all (default all)")
    args = parser.parse_args(argv)
    variants = parse_variants(args.variant)  # validated before anything is written
    backend = detect()
    print(backend.banner())
    rundir.lock_mode(ONNX_MODEL.parent.parent)  # never rebuild the models while a run of this mode reads them

    source = export(ONNX_MODEL)
    print(f"exported {ONNX_MODEL} (fp32, opset {OPSET})")
    for variant in variants:
        if backend.is_npu:
            path = build_npu(variant, source, backend)
            counts = om_op_counts(variant.om_json_path())
        else:
            path = build_portable(variant, source)
            counts = onnx_op_counts(path)
        ops = ", ".join(f"{k} x{v}" for k, v in sorted(counts.items()))
        print(f"[{variant.name}] {path.relative_to(ONNX_MODEL.parent.parent)}: {ops}")
    return 0


if __name__ == "__main__":
    run_cli(main)
