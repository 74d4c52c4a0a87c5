"""Run the offline model of each precision variant under a profiler and see what the Casts cost.

What you will do: execute each variant's offline model 3 times to warm up and 20 times
measured, profiled, from Python: with pyACL under ``msprof`` on an NPU (or in-process with
``acl.prof``, option ``--acl-prof``), with ONNX Runtime's profiler anywhere else. Both write
msprof's ``op_summary`` / ``op_statistic`` files; the report reads them back and compares the
variants: Cast ops per execute, Cast and MatMul share of op time, accuracy against fp32.

What you will learn:
- the Cast ops you see come from the offline converter's precision policy, not from your model;
- how to remove them (fp16 IO, or fp32 compute) and what each way costs in accuracy;
- how to keep warm-up executes out of the measured window, and to check counts against the graph.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for `common`

import numpy as np
from acl_worker import find_export, measured_window_npu, run_step, worker_argv, worker_main
from build_model import om_op_counts, onnx_op_counts
from ort_profile import collect_portable, validate_portable
from variant_report import VariantResult, explain, render, summary
from variants import MEASURED, WARMUP, Variant, parse_variants

from common import workload
from common.analyze import checks
from common.analyze.checks import Verdict
from common.backend import Backend, detect, select_device
from common.collect import npu_commands
from common.errors import LabError
from common.formats import readers, schema, writers
from common.formats.table import read_table
from common.lesson import Lesson, main_of
from common.render import text

MODE_DIR = Path(__file__).resolve().parent.parent  # 03_api_pyAcl/; the run's files go to its prof_out/


# --- 1. profile ------------------------------------------------------------------------------------
def profile_npu(variant: Variant, variant_dir: Path, backend: Backend, device: int, acl_prof: bool):
    """pyACL under msprof: msprof starts the worker (this file, ``--worker``) and exports its CSVs.

    With ``--acl-prof`` the worker profiles itself (``acl_chain.run_om``): acl.prof.init right after
    acl.init (before the model is loaded), create_config -> start after the warm-up, the measured
    executes, then stop -> destroy_config, and finalize before acl.finalize. That leaves raw data
    only, so ``msprof --export`` turns each PROF_* into CSVs.
    """
    msprof = backend.tools["msprof"]
    env_vars = select_device(backend, device)  # a logical id here; the worker selects it itself
    output_npy = variant_dir / "output.npy"
    app = worker_argv(variant, output_npy, device)  # python infer.py --worker <variant> --device <id> --om ...
    if acl_prof:
        run_step([*app, "--acl-prof", str(variant_dir)], env_vars, "the pyACL worker (acl.prof)")
        for prof_dir in sorted(variant_dir.glob("PROF_*")):  # acl.prof writes raw data; msprof exports it
            run_step(npu_commands.msprof_export_argv(msprof, prof_dir), env_vars, "msprof --export")
    else:
        run_step(npu_commands.msprof_argv(msprof, variant_dir, app), env_vars, "msprof")
    files = {name: find_export(variant_dir, name) for name in ("op_summary", "op_statistic")}
    return files, np.load(output_npy)


# --- 2. check --------------------------------------------------------------------------------------
# Accuracy against the fp32 reference. fp16 keeps 11 significant bits (~3 decimal digits) and
# every layer sums 1024 rounded products, so an fp16 path agrees in direction (cosine), not digit
# by digit. 0.999 is the usual acceptance line for fp16 inference.
COSINE_MIN = 0.999
# Max abs diff, next to outputs whose largest magnitude is ~0.09: fp16 rounding of weights and
# activations stays well below 5e-3 (~5% of the largest output).
FP16_MAX_ABS_DIFF = 5e-3
# fp32 (must_keep_origin_dtype): only the summation order differs on CPU (~1e-7); an NPU's fp32 MatMul
# may accumulate in another order or in HF32 where --allow_hf32 enables it, hence 1e-3 rather than 1e-6.
FP32_MAX_ABS_DIFF = 1e-3


def file_verdict(variant: Variant, files: dict[str, Path], npu: bool) -> Verdict:
    """Both files exist, have rows, and carry the columns msprof writes (all of them, on portable)."""
    parts, ok = [], True
    npu_columns = ["Op Name", "OP Type", "Task Type", "Task Start Time(us)", "Task Duration(us)"]
    required = {"op_summary": npu_columns if npu else schema.OP_SUMMARY, "op_statistic": schema.OP_STATISTIC}
    for name, columns in required.items():
        try:
            rows = len(read_table(files[name], columns, "msprof / this mode"))
        except LabError as err:
            ok, rows = False, f"error: {err}"
        ok &= isinstance(rows, int) and rows > 0
        parts.append(f"{files[name].name} {len(columns)} columns, {rows} rows")
    return Verdict(f"files and columns ({variant.name})", ok, "; ".join(parts))


def graph_count_verdict(result: VariantResult) -> Verdict:
    """Each op type runs per execute exactly as often as the built graph holds it."""
    measured = Counter(t.op_type for t in result.tasks)
    parts, ok = [], True
    for op_type in sorted(set(result.graph_counts) | set(measured)):
        want, got = result.graph_counts.get(op_type, 0), measured.get(op_type, 0) / MEASURED
        ok &= got == want
        parts.append(f"{op_type} {got:g} (graph {want})")
    return Verdict(f"op counts per execute match the graph ({result.variant.name})", ok, ", ".join(parts))


def variant_verdicts(result: VariantResult, npu: bool) -> list[Verdict]:
    name, casts = result.variant.name, result.per_execute("Cast")
    verdicts = [
        file_verdict(result.variant, result.files, npu),
        Verdict(f"measured window ({name})", result.window_ok, result.window),
        checks.check_top_family(result.stats, "matmul", name),
        graph_count_verdict(result),
    ]
    if name == "default":  # the converter's fp16 policy with fp32 IO must show its boundary Casts
        share = f"{100 * result.share('cast'):.1f}% of op time"
        verdicts.append(Verdict("Cast present (default)", casts > 0, f"{casts:g} Cast per execute, {share}"))
    if name == "fp32":
        verdicts.append(Verdict("Cast absent (fp32)", casts == 0, f"{casts:g} Cast per execute"))
        # Without a precision change the graph is the model itself: 4 MatMul, 3 Gelu per execute.
        expected = workload.expected_op_counts(workload.build_model())
        verdicts.append(checks.check_counts(result.tasks, MEASURED, expected, name))
    tol = FP16_MAX_ABS_DIFF if result.variant.fp16_compute else FP32_MAX_ABS_DIFF
    verdicts.append(checks.check_output(result.metrics, name, tol, COSINE_MIN))
    return verdicts


# --- 3. read ---------------------------------------------------------------------------------------
def profile_and_read(variant: Variant, variant_dir: Path, run, acl_prof: bool, reference) -> VariantResult:
    """Profile one variant, count its built graph, read the files back strictly, cut the measured window."""
    raw = None
    if run.npu:
        files, output = profile_npu(variant, variant_dir, run.backend, run.device, acl_prof)
        graph = om_op_counts(variant.om_json_path())
    else:  # the portable window is cut while converting ORT's profile (ort_profile.measured_events)
        files, output, raw, window, window_ok = collect_portable(variant, variant_dir)
        graph = onnx_op_counts(variant.portable_path())
    tasks = readers.read_op_summary(files["op_summary"])
    readers.read_op_statistic(files["op_statistic"])  # strict reader: a damaged file stops here
    if run.npu:  # msprof saw the warm-up executes too (acl.prof did not): cut them by execute
        tasks, window, window_ok = measured_window_npu(tasks, acl_prof)
    metrics = workload.compare_to_reference(output.astype(np.float32), reference)
    stats = writers.aggregate_op_statistic(tasks)
    return VariantResult(variant, tasks, stats, graph, metrics, files, window, window_ok, raw)


# --- 4. interpret ---------------------------------------------------------------------------------
def interpret(results: dict[str, VariantResult], backend: Backend) -> str:
    """The variants side by side, then what the numbers say about the Casts (variant_report.explain).

    Read the table row by row: ``default`` pays Casts for fp32 IO around fp16 compute; ``fp16-io``
    moves the input conversion to the caller; ``fp32`` has no Cast and the reference's accuracy.
    Cast share is the time they cost; the accuracy columns are what removing them costs instead.
    """
    return "\n".join([render(results, backend), *explain(results, backend.is_npu)])


def validate(variants: list[Variant], backend: Backend) -> None:
    """Everything a user can get wrong is checked before prof_out/ is touched."""
    for variant in variants:
        if backend.is_npu and not variant.om_path().is_file():
            raise LabError(f"model file {variant.om_path()} not found", "build it first: bash 03_api_pyAcl/build_model.sh")
        if not backend.is_npu:
            validate_portable(variant)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:  # msprof started this process: be the pyACL program (acl_worker.py)
        return worker_main(argv[1:])
    lesson = Lesson("pyacl", MODE_DIR, __doc__, output=False)
    lesson.parser.add_argument("variant", nargs="?", default="all", help="default, fp16-io, fp32 or all (default all)")
    lesson.parser.add_argument("--acl-prof", action="store_true", help="npu: collect with acl.prof, not msprof")
    args = lesson.parse(argv)
    variants = parse_variants(args.variant)
    npu = detect().is_npu
    run = lesson.start(args=args, check=lambda backend: validate(variants, backend),
                       command=[sys.executable, __file__, *argv], variants=[v.name for v in variants],
                       warmup_executes=WARMUP, measured_executes=MEASURED,
                       collection=("acl.prof" if args.acl_prof else "msprof") if npu else "onnxruntime")
    reference = workload.reference_output()
    results: dict[str, VariantResult] = {}
    verdicts: list[Verdict] = []
    code = 1
    try:
        for variant in variants:
            (run.out / variant.name).mkdir()
            print(f"[{variant.name}] {variant.summary}", flush=True)
            results[variant.name] = profile_and_read(variant, run.out / variant.name, run, args.acl_prof, reference)
            verdicts += variant_verdicts(results[variant.name], run.npu)
        print(interpret(results, run.backend))
        print(text.render_verdicts(verdicts))
        code = 0 if all(v.ok for v in verdicts) else 1
    finally:  # also on an error: run_info.json keeps what was measured, marked incomplete
        run.finish(completed=len(results) == len(variants), exit_code=code, results=summary(results, run.out, run.npu),
                   verdicts_passed=bool(verdicts) and all(v.ok for v in verdicts))
    print(f"Output: {run.out}")
    return code


if __name__ == "__main__":
    main_of(main)
