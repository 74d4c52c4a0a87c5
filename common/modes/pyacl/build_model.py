"""Build one offline model per precision variant from the exported ONNX file (``bash 03_api_pyAcl/build_model.sh``).

The lab exports the workload's model (TinyMLP unless ``--workload FILE``) to ONNX with the lesson
``export_onnx.py``, then converts it offline, once per variant: with ATC into ``model/npu/<name>_<variant>.om`` on
an NPU machine (for the SoC of logical device ``--device``, default 0, or ``$SOC_VERSION``), or
with ONNX Runtime into ``model/portable/<name>_<variant>.opt.onnx`` anywhere else.

What it shows:
- the offline converter, not your code, decides the precision: ATC's default policy computes
  in fp16 while the model's IO stays fp32, so it must insert Cast ops at the boundary;
- the two ways to remove those Casts (feed fp16 yourself, or keep fp32 compute) and that each
  is just a converter option;
- to count what the converter produced (ops by type in the built graph) and to name what it
  fused, before profiling it.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
import warnings
from collections import Counter
from pathlib import Path

from common.modes.pyacl.export import LESSON as EXPORT_LESSON
from common.modes.pyacl.export import export, export_notes, frozen_path, opset, stamp
from common.analyze.graph_changes import Change, build_changes, describe, type_counts
from common.modes.pyacl.variants import BUILD, MODEL_DIR, ModelFiles, Variant, parse_variants, recorded

from common import cache
from common.analyze.flops import graph_flops, graph_shapes, shapes_to_run
from common.collect.flop_count import count_flops, run_shapes
from common.backend import Backend, detect, parse_device_id, soc_version
from common.collect import npu_commands
from common.errors import ArgumentParser, LabError, run_cli
from common.formats import rundir
from common.modes.lesson import Lesson
from common.workload import load_workload


# ----- reading a built graph ---------------------------------------------------------------------
def load_onnx(path: Path, files: ModelFiles, *, check_record: bool = True, optimized: bool = False):
    """Load and check an ONNX file built for ``files``' workload; anything else is a usage error.

    ``optimized``: a file ONNX Runtime wrote, which may hold its own fused ops (SimplifiedLayerNormalization,
    QuickGelu ...) that ONNX's checker does not know; it is checked by loading it, not by the checker.
    """
    import onnx

    if not path.is_file():
        raise LabError(f"model file {path} not found", _build_hint(files))
    try:
        model = onnx.load(str(path))
        if not optimized:
            onnx.checker.check_model(model)
    except Exception as err:  # protobuf DecodeError, ValidationError, ...: all mean "not a usable file"
        raise LabError(
            f"{path} is not a valid ONNX model ({type(err).__name__})",
            f"rebuild it: {_build_hint(files).removeprefix('build it first: ')}",
        ) from None
    check_inputs(path, {i.name: _dims(i) for i in model.graph.input}, files)
    if check_record:
        files.check_record(path, recorded(model))
    return model


def _build_hint(files: ModelFiles) -> str:
    return f"build it first: {BUILD}" + (f" --workload {files.workload.path}" if files.workload.path else "")


def _dims(value_info) -> list[int | str]:
    return [
        d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in value_info.type.tensor_type.shape.dim
    ]


def check_inputs(path: Path, inputs: dict[str, list], files: ModelFiles) -> None:
    """The model takes exactly the workload's inputs, by name and shape; anything else was built for others."""
    if inputs != files.input_shapes:

        def listed(items: dict) -> str:
            return ", ".join(f"{name}{list(dims)}" for name, dims in items.items()) or "no input"

        raise LabError(
            f"{path} takes {listed(inputs)}, but the lab feeds {listed(files.input_shapes)}",
            f"rebuild it from the workload: {_build_hint(files).removeprefix('build it first: ')}",
        )


def onnx_types(model) -> Counter[str]:
    """Compute ops by type in a loaded ONNX graph: what one execute of it runs."""
    return type_counts(n.op_type for n in model.graph.node)


def fused_conv_activations(model) -> Counter[str]:
    """FusedConv nodes by the activation ONNX Runtime fused into them (its ``activation`` attribute)."""
    found: Counter[str] = Counter()
    for node in model.graph.node:
        if node.op_type == "FusedConv":
            for attr in node.attribute:
                if attr.name == "activation":
                    found[attr.s.decode()] += 1
    return found


def om_op_counts(json_path: Path) -> Counter[str]:
    """Compute ops by type in an om graph dumped by ``atc --mode=1``."""
    try:
        graphs = json.loads(json_path.read_text())["graph"]
    except (OSError, ValueError, KeyError) as err:
        raise LabError(f"{json_path}: cannot read the om graph dump ({err})", f"rebuild: {BUILD}") from None
    return type_counts(op.get("type") for g in graphs for op in g.get("op", []))


def graph_facts(files: ModelFiles, variants: list[Variant], npu: bool) -> dict:
    """What the run checks against the graphs, read from the built files (each loaded and checked here): the
    exported graph's FLOPs per family, its uncountable nodes and the path its trace froze; per variant the
    built graph's ops by type and what the converter changed. JSON values, kept with the build's record."""
    exported = load_onnx(files.onnx, files)
    shapes = graph_shapes(exported)  # ONNX's shape inference, once; what only a run gives, from one ONNX Runtime run
    shapes.update(run_shapes(exported, shapes_to_run(exported, shapes), dict(zip(files.input_names, files.arrays))))
    flops, unknown = graph_flops(exported, shapes)
    facts = {"exported": {"flops": flops, "unknown": unknown, "frozen": frozen_path(exported)}, "variants": {}}
    for variant in variants:
        built, changes = graph_changes(variant, files, npu)
        facts["variants"][variant.name] = {"built": dict(built), "changes": [dataclasses.asdict(c) for c in changes]}
    return facts


def variant_facts(facts: dict, variant: Variant) -> tuple[Counter[str], list[Change]]:
    """(the built graph's ops by type, the converter's changes) of one variant, from :func:`graph_facts`."""
    found = facts["variants"][variant.name]
    return Counter(found["built"]), [Change(**change) for change in found["changes"]]


def graph_changes(variant: Variant, files: ModelFiles, npu: bool) -> tuple[Counter[str], list]:
    """The variant's built graph (op types) and what the converter changed against the exported ONNX graph."""
    exported = onnx_types(load_onnx(files.onnx, files))
    if npu:
        built = om_op_counts(files.om_json_path(variant))
        return built, build_changes(exported, built, "atc")
    model = load_onnx(files.portable_path(variant), files, optimized=True)
    built = onnx_types(model)
    return built, build_changes(exported, built, "onnxruntime", fused_conv_activations(model))


# ----- portable: ONNX Runtime offline optimization -----------------------------------------------
FP32_RETRIES = 4  # op types kept in fp32 one at a time, each named by the runtime's refusal


def build_portable(variant: Variant, files: ModelFiles) -> Path:
    """Apply the variant's precision policy to the export, then let ONNX Runtime optimize and save it.

    Like ATC's policy, an op with no fp16 kernel keeps fp32: when ONNX Runtime refuses to run the fp16
    graph on the workload's input and names an op type of it (ScatterElements with reduction 'add'),
    that type is kept in fp32 and the variant built again, and the build says which types it kept.
    """
    import onnx

    exported = load_onnx(files.onnx, files)
    kept: list[str] = []
    while True:
        out = _build_portable_once(variant, files, exported, kept)
        refused = _first_run_error(out, files, variant)
        if refused is None:
            break
        op = next((t for t in sorted(onnx_types(exported)) if t in refused and t not in kept), None)
        if op is None or len(kept) >= FP32_RETRIES or not variant.fp16_compute:
            raise LabError(
                f"ONNX Runtime cannot run variant {variant.name}: {refused}",
                "the portable backend runs what ONNX Runtime's CPU provider supports; try variant fp32",
            )
        kept.append(op)
    if kept:
        print(
            f"  [{variant.name}] kept in fp32, as ATC keeps an op without an fp16 kernel: {', '.join(kept)} "
            "(ONNX Runtime's CPU provider refused it in fp16)"
        )
    optimized = onnx.load(str(out))
    stamp(optimized, files)  # the file records its workload: run.sh refuses it for another one
    onnx.save(optimized, str(out))
    return out


def _first_run_error(path: Path, files: ModelFiles, variant: Variant) -> str | None:
    """The first line of ONNX Runtime's error when it runs the built file once on the workload's input, or None."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4  # its refusal comes back as the exception, not as a log line too
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the file as saved
    try:
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        session.run(None, dict(zip(files.input_names, files.feeds(variant))))
    except Exception as err:  # noqa: BLE001 (ORT's own exception types: what its CPU provider cannot run)
        return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return None


def _build_portable_once(variant: Variant, files: ModelFiles, model, kept: list[str]) -> Path:
    import onnx
    import onnxruntime as ort

    if variant.fp16_compute:
        from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST, convert_float_to_float16

        # The same policy as ATC's default: weights and ops become fp16. keep_io_types=True keeps
        # the model's inputs and outputs fp32, which is exactly what forces a Cast at each boundary.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "value truncated to fp16": expected here
            model = convert_float_to_float16(
                model, keep_io_types=variant.io_dtype == "float32", op_block_list=[*DEFAULT_OP_BLOCK_LIST, *kept]
            )
    out = files.portable_path(variant)
    out.parent.mkdir(parents=True, exist_ok=True)
    converted = out.with_name(out.name.replace(".opt.onnx", ".converted.onnx"))
    onnx.save(model, str(converted))

    options = ort.SessionOptions()
    # EXTENDED: fusions (Gemm + GELU pattern -> Gelu, Conv + Relu -> FusedConv) without the
    # hardware-specific layout changes of ALL, so the saved file is a plain graph any CPU runs as saved.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(out)
    options.log_severity_level = 3  # errors only
    try:
        ort.InferenceSession(str(converted), options, providers=["CPUExecutionProvider"])
    except Exception as err:  # ORT's own exception types: an op or dtype its CPU provider cannot run
        raise LabError(
            f"ONNX Runtime cannot build variant {variant.name}: {str(err).strip().splitlines()[0]}",
            "the portable backend runs what ONNX Runtime's CPU provider supports; try variant fp32",
        ) from None
    finally:
        converted.unlink(missing_ok=True)
    return out


# ----- npu: ATC ----------------------------------------------------------------------------------
def build_npu(variant: Variant, files: ModelFiles, backend: Backend, device: int = 0) -> Path:
    """Run ATC for one variant for the SoC of logical device ``device``, dump the om graph to JSON so its
    ops can be counted, record the workload."""
    atc = backend.tools.get("atc")
    if not atc:
        raise LabError("atc not found on PATH", "source CANN's set_env.sh (it puts atc on PATH)")
    files.om_stem(variant).parent.mkdir(parents=True, exist_ok=True)
    files.om_record_path(variant).unlink(missing_ok=True)  # a failed build leaves no record of a workload
    soc = soc_version(backend, device)  # never hard-coded: the .om only runs on the chip it was built for
    options = variant.atc_options(files.float_inputs)
    for argv in (
        npu_commands.atc_argv(atc, files.onnx, files.om_stem(variant), soc, files.atc_input_shape(), options),
        npu_commands.atc_om_to_json_argv(atc, files.om_path(variant), files.om_json_path(variant)),
    ):
        print("$ " + " ".join(argv), flush=True)
        code = subprocess.run(argv, check=False).returncode
        if code != 0:
            raise LabError(
                f"{Path(argv[0]).name} exited with {code} for variant {variant.name}", "read ATC's messages above"
            )
    files.write_om_record(variant)
    return files.om_path(variant)


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variant", nargs="?", default="all", help="default, fp16-io, fp32 or all (default all)")
    Lesson.add_workload_option(parser)  # --workload FILE, as run.sh takes it
    parser.add_argument(
        "--device", default="0", help="npu: build for this logical device's SoC (default 0; $SOC_VERSION overrides)"
    )
    args = parser.parse_args(argv)
    variants = parse_variants(args.variant)  # validated before anything is written
    device = parse_device_id(args.device)
    files = ModelFiles(load_workload(args.workload))  # a broken workload file stops here, one line
    backend = detect()
    print(backend.banner())
    rundir.lock_mode(MODEL_DIR.parent)  # never rebuild the models while a run of this mode reads them

    kept = BuildRecord(files, variants, backend, device)
    if kept.lines is not None:  # nothing it was built from changed: the files are the ones it would build
        print(f"up to date: {kept.why}", *kept.lines, sep="\n")
        return 0
    import onnx

    source = export(files)
    lines = _say(
        f"exported {source.relative_to(MODEL_DIR.parent)} for workload {files.workload.name} "
        f"(fp32, opset {opset(onnx.load(str(source), load_external_data=False))}; inputs {files.atc_input_shape()}; outputs {', '.join(files.output_names)})",
        *export_notes(files, source),
    )
    paths = {
        v.name: build_npu(v, files, backend, device) if backend.is_npu else build_portable(v, files) for v in variants
    }
    facts = graph_facts(files, variants, backend.is_npu)
    try:  # the model's side of run.sh's FLOPs check, counted here where torch is loaded, kept with the workload
        files.workload.forward_flops(count_flops)
    except Exception:  # noqa: BLE001, S110 (run.sh counts again and says why the check is not applicable)
        pass
    for variant in variants:
        built, changes = variant_facts(facts, variant)
        ops = ", ".join(f"{k} x{v}" for k, v in sorted(built.items()))
        lines += _say(
            f"[{variant.name}] {paths[variant.name].relative_to(MODEL_DIR.parent)}: {ops}",
            f"  {'ATC' if backend.is_npu else 'ONNX Runtime'} changed: {describe(changes)}",
        )
    kept.keep(lines, facts)
    return 0


def _say(*lines: str) -> list[str]:
    print(*lines, sep="\n", flush=True)
    return list(lines)


class BuildRecord:
    """The build's record in .lab_cache (common.cache): what it printed, the files it wrote with their hashes, and
    what their graphs say (:func:`graph_facts`), which the run then reads instead of loading them again.

    A build is redone unless everything it was made from is unchanged: the workload (its file, every file
    its import and forward read: its record in common.workload), this mode's build code, the variants, the
    backend (on the NPU the SoC and the ATC executable) and the toolchain; and the files it wrote are still
    there, byte for byte. ``lines`` is what the kept build printed and ``facts`` its graph facts, or both None
    when it must be redone.
    """

    KIND = "pyacl_build"

    def __init__(self, files: ModelFiles, variants: list[Variant], backend: Backend, device: int) -> None:
        self.files, self.npu = files, backend.is_npu
        self.outputs = [files.onnx, *(path for v in variants for path in self._written(v))]
        work = files.workload
        self.key = f"{backend.name}|{work.path or work.name}|{work.sha256}|{','.join(v.name for v in variants)}"
        extra: dict = {"variants": [v.name for v in variants], "backend": backend.name}
        if self.npu:
            atc = Path(backend.tools.get("atc") or "atc").resolve()
            stat = atc.stat() if atc.exists() else None
            extra |= {
                "soc": soc_version(backend, device),
                "atc": [str(atc), *((stat.st_size, stat.st_mtime_ns) if stat else ())],
            }
        self.extra = extra
        self.sources = [*sorted(Path(__file__).parent.glob("*.py")), EXPORT_LESSON]  # the harness and the lesson
        self.workload_files = work.record_files()
        self.lines, self.facts, self.why = None, None, ""
        found = cache.load(self.KIND, self.key, extra) if self.workload_files is not None else None
        if found is not None and cache.fingerprint(self.outputs) == found["result"]["outputs"]:
            self.lines, self.facts = found["result"]["lines"], found["result"]["facts"]
            self.why = (
                f"the model files were built {found['result']['when']} from this workload, build code and "
                f"toolchain, and are unchanged since ({cache.CACHE_VAR}=off rebuilds every time)"
            )

    def _written(self, variant: Variant) -> list[Path]:
        files = self.files
        if self.npu:
            return [files.om_path(variant), files.om_json_path(variant), files.om_record_path(variant)]
        return [files.portable_path(variant)]

    def keep(self, lines: list[str], facts: dict) -> None:
        """Record a build that printed ``lines`` and whose graphs say ``facts`` (:func:`graph_facts`)."""
        if self.workload_files is None:  # a workload without a record (the cache is off): nothing to vouch for
            return
        cache.save(
            self.KIND,
            self.key,
            cache.inputs_of([*self.workload_files, *self.sources], self.extra),
            {
                "outputs": cache.fingerprint(self.outputs),
                "lines": lines,
                "facts": facts,
                "when": time.strftime("%Y-%m-%d %H:%M %Z"),
            },
        )


if __name__ == "__main__":
    run_cli(main)
