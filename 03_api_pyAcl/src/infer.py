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

import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root, for `common`

import numpy as np
from build_model import load_onnx, om_op_counts, onnx_op_counts
from variants import INPUT_NAME, PROF_OUT, VARIANTS, Variant, parse_variants

from common import workload
from common.analyze import checks
from common.analyze import families
from common.backend import Backend, detect, parse_device_id, select_device
from common.render import text
from common.formats import rundir
from common.analyze.checks import Verdict
from common.collect import launcher, msprof_layout, npu_commands
from common.errors import ArgumentParser, LabError, run_cli
from common.formats import readers, schema, writers
from common.formats.records import OpStat, Task
from common.formats.table import read_table

MODE = "pyacl"  # as in run_info.json and the nox session
WARMUP = workload.WARMUP_FORWARDS  # 3: first executes pay allocation and cache set-up; never measured
MEASURED = workload.MEASURED_FORWARDS  # 20

# Accuracy against the fp32 reference. fp16 keeps 11 significant bits (~3 decimal digits) and
# every layer sums 1024 rounded products, so an fp16 path agrees in direction (cosine), not digit
# by digit. 0.999 is the usual acceptance line for fp16 inference.
COSINE_MIN = 0.999
# Max abs diff, next to outputs whose largest magnitude is ~0.09: fp16 rounding of weights and
# activations stays well below 5e-3 (~5% of the largest output).
FP16_MAX_ABS_DIFF = 5e-3
# fp32: only the summation order differs on CPU (~1e-7), but force_fp32 on Atlas A2 may still run
# MatMul in HF32 (a shorter mantissa) unless --allow_hf32 is off, hence 1e-3 rather than 1e-6.
FP32_MAX_ABS_DIFF = 1e-3

# The original demo's figures on an Atlas 910B3 (ATC default policy), quoted for comparison only:
# measured elsewhere, not by this lab.
REFERENCE_910B3_SHARE_PCT = {"MatMulV2": 42.0, "Gelu": 29.4, "Cast": 28.6}

# ONNX Runtime names the Casts it adds to run an fp16 node on an fp32-only CPU kernel this way.
ORT_FALLBACK_CAST_PREFIX = "InsertedPrecisionFreeCast"


@dataclass
class VariantResult:
    """Everything the checks and the report need about one variant, read back from disk."""

    variant: Variant
    tasks: list[Task]  # measured executes only
    stats: list[OpStat]  # op_statistic of those tasks
    graph_counts: Counter  # compute ops by type in the built model file
    metrics: dict[str, float]  # accuracy against the fp32 reference
    files: dict[str, Path]
    window: str  # how the measured window was cut, in words
    window_ok: bool
    raw_profile: Path | None = None
    notes: list[str] = field(default_factory=list)

    def per_execute(self, op_type: str) -> float:
        return sum(1 for t in self.tasks if t.op_type == op_type) / MEASURED

    def share(self, family: str) -> float:
        return families.family_share(self.stats).get(family, 0.0)

    def execute_us(self) -> float:
        return sum(t.duration_us for t in self.tasks) / MEASURED


# ===== workload ===================================================================================
def make_feed(variant: Variant) -> np.ndarray:
    """The shared input, in the dtype the variant's model takes (fp16-io: the caller converts)."""
    return workload.make_input().numpy().astype(variant.numpy_io_dtype)


def check_feed(feed: np.ndarray, shape: list, dtype: str, where: str) -> None:
    """The array fed must match the model's input exactly; ORT and ACL would fail less clearly."""
    if list(feed.shape) != list(shape) or feed.dtype != np.dtype(dtype):
        raise LabError(
            f"{where} takes {dtype}{list(shape)}, the input is {feed.dtype}{list(feed.shape)}",
            "feed common.workload.make_input() in the variant's dtype, or rebuild the model",
        )


# ===== collect: portable (ONNX Runtime) ===========================================================
_ORT_TYPES = {"tensor(float)": "float32", "tensor(float16)": "float16"}


def open_session(path: Path, profile_prefix: Path | None = None):
    """An ORT session on an already-optimized model file, run as saved."""
    import onnxruntime as ort

    load_onnx(path)  # missing / corrupt / wrong-shape files stop here with one clear line
    options = ort.SessionOptions()
    # The file was optimized offline by build_model.py: run it as saved, so the ops ORT executes
    # are exactly the nodes we count in the file.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    if profile_prefix is not None:
        options.enable_profiling = True
        options.profile_file_prefix = str(profile_prefix)
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as err:  # ORT raises its own exception types for unloadable graphs
        raise LabError(
            f"ONNX Runtime cannot load {path}: {str(err).splitlines()[0]}", "rebuild: bash 03_api_pyAcl/build_model.sh"
        ) from None


def validate_portable(variant: Variant) -> None:
    """Before anything is written: the model exists, loads, and takes this variant's input."""
    path = variant.portable_path()
    session = open_session(path)
    inp = session.get_inputs()[0]
    check_feed(make_feed(variant), inp.shape, _ORT_TYPES.get(inp.type, inp.type), f"{path.name} input {inp.name}")


def collect_portable(variant: Variant, variant_dir: Path) -> tuple[dict[str, Path], np.ndarray, Path, str, bool]:
    """Run the variant under ORT's profiler and write msprof-schema files of the measured runs."""
    from ort_profile import load_profile, measured_events, to_tasks

    session = open_session(variant.portable_path(), variant_dir / "onnxruntime_profile")
    feed = make_feed(variant)
    try:
        for _ in range(WARMUP + MEASURED):
            output = session.run(None, {INPUT_NAME: feed})[0]
    except Exception as err:
        raise LabError(f"ONNX Runtime failed to run {variant.portable_path()}: {str(err).splitlines()[0]}") from None
    raw = Path(session.end_profiling()).rename(variant_dir / "onnxruntime_profile.json")
    profile = load_profile(raw)
    events = measured_events(profile, WARMUP, MEASURED)  # warm-up runs are filtered out here, by run
    tasks = writers.with_wait_times(to_tasks(events, session.get_profiling_start_time_ns()))

    prof = msprof_layout.new_prof_dir(variant_dir)
    files = {
        "op_summary": writers.write_op_summary(prof.file("op_summary"), tasks),
        "op_statistic": writers.write_op_statistic(prof.file("op_statistic"), writers.aggregate_op_statistic(tasks)),
        "timeline": writers.write_trace(
            prof.file("msprof", "json"), writers.timeline_events(tasks, os.getpid(), "CPU (ONNX Runtime)")
        ),
    }
    window = f"{len(profile.runs)} runs recorded, the first {WARMUP} excluded by run, {MEASURED} measured"
    return files, output, raw, window, len(profile.runs) == WARMUP + MEASURED


# ===== collect: npu (pyACL under msprof, or acl.prof) =============================================
def worker_main(argv: list[str]) -> int:
    """The pyACL program msprof runs: one variant, warm-up + measured executes, output saved to .npy."""
    parser = ArgumentParser(prog="infer.py --worker")
    parser.add_argument("variant", choices=list(VARIANTS))
    parser.add_argument("--om", type=Path, required=True)
    parser.add_argument("--output-npy", type=Path, required=True)
    parser.add_argument("--acl-prof", type=Path, default=None, help="collect in-process into this directory")
    args = parser.parse_args(argv)
    variant = VARIANTS[args.variant]
    if not args.om.is_file():
        raise LabError(f"model file {args.om} not found", "build it first: bash 03_api_pyAcl/build_model.sh")
    import acl
    from acl_chain import run_om

    feed = make_feed(variant)
    # ASCEND_RT_VISIBLE_DEVICES (set by the driver) leaves one card visible: inside, it is device 0.
    output = run_om(
        acl,
        args.om,
        0,
        feed,
        variant.numpy_io_dtype,
        tuple(feed.shape),
        WARMUP,
        MEASURED,
        prof_dir=args.acl_prof.resolve() if args.acl_prof else None,
    )
    np.save(args.output_npy, output)
    return 0


def _run(argv: list[str], env_vars: dict[str, str], what: str) -> None:
    print("$ " + " ".join(argv), flush=True)
    run = launcher.run_command(argv, env_vars)  # own session: Ctrl-C / SIGTERM stop msprof and the worker together
    run.raise_if_stopped()
    if not run.ok:
        raise LabError(f"{what} {run.describe}", "read the messages above")


def _find_export(variant_dir: Path, name: str) -> Path:
    found = sorted(variant_dir.glob(f"PROF_*/{msprof_layout.OUTPUT_SUBDIR}/{name}_*.csv"))
    if not found:
        raise LabError(
            f"no {name}_*.csv under {variant_dir}/PROF_*/{msprof_layout.OUTPUT_SUBDIR}", "check msprof's messages"
        )
    return found[-1]


def collect_npu(variant: Variant, variant_dir: Path, backend: Backend, device: int, acl_prof: bool):
    """Run the pyACL worker under msprof (or with acl.prof), then locate msprof's exported files."""
    msprof = backend.tools["msprof"]
    env_vars = select_device(backend, device)  # set before msprof starts, so all of them see one card
    output_npy = variant_dir / "output.npy"
    app = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        variant.name,
        "--om",
        str(variant.om_path()),
        "--output-npy",
        str(output_npy),
    ]
    if acl_prof:
        _run([*app, "--acl-prof", str(variant_dir)], env_vars, "the pyACL worker (acl.prof)")
        for prof_dir in sorted(variant_dir.glob("PROF_*")):  # acl.prof writes raw data; msprof exports it
            _run(npu_commands.msprof_export_argv(msprof, prof_dir), env_vars, "msprof --export")
    else:
        _run(npu_commands.msprof_argv(msprof, variant_dir, app), env_vars, "msprof")
    files = {name: _find_export(variant_dir, name) for name in ("op_summary", "op_statistic")}
    return files, np.load(output_npy), acl_prof


def measured_window_npu(tasks: list[Task], acl_prof: bool) -> tuple[list[Task], str, bool]:
    """acl.prof started after the warm-up; msprof saw everything, so cut the first WARMUP executes.

    A static om launches the same task list on every execute, so each execute is len/23 tasks.
    """
    if acl_prof:
        return tasks, f"acl.prof started after {WARMUP} warm-up executes; {MEASURED} recorded", True
    total = WARMUP + MEASURED
    if not tasks or len(tasks) % total:
        return tasks, f"{len(tasks)} tasks are not {total} equal executes; window not cut", False
    per_execute = len(tasks) // total
    ordered = sorted(tasks, key=lambda t: t.start_us)
    return ordered[WARMUP * per_execute :], f"{total} executes recorded x {per_execute} tasks; first {WARMUP} cut", True


# ===== parse =====================================================================================
def read_back(
    variant: Variant, files: dict[str, Path], npu: bool, acl_prof: bool
) -> tuple[list[Task], str | None, bool | None]:
    tasks = readers.read_op_summary(files["op_summary"])
    readers.read_op_statistic(files["op_statistic"])  # strict reader: a damaged file stops here
    if npu:
        return measured_window_npu(tasks, acl_prof)
    return tasks, None, None


def file_verdict(variant: Variant, files: dict[str, Path], npu: bool) -> Verdict:
    """Both files exist, have rows, and carry the columns msprof writes (all of them, on portable)."""
    parts, ok = [], True
    required = {
        "op_summary": schema.OP_SUMMARY
        if not npu
        else ["Op Name", "OP Type", "Task Type", "Task Start Time(us)", "Task Duration(us)"],
        "op_statistic": schema.OP_STATISTIC,
    }
    for name, columns in required.items():
        try:
            table = read_table(files[name], columns, "msprof / this mode")
            rows = len(table)
        except LabError as err:
            ok, rows = False, f"error: {err}"
        ok &= isinstance(rows, int) and rows > 0
        parts.append(f"{files[name].name} {len(columns)} columns, {rows} rows")
    return Verdict(f"files and columns ({variant.name})", ok, "; ".join(parts))


# ===== check =====================================================================================
def graph_count_verdict(result: VariantResult) -> Verdict:
    """Each op type runs per execute exactly as often as the built graph holds it."""
    measured = Counter(t.op_type for t in result.tasks)
    parts, ok = [], True
    for op_type in sorted(set(result.graph_counts) | set(measured)):
        want = result.graph_counts.get(op_type, 0)
        got = measured.get(op_type, 0) / MEASURED
        ok &= got == want
        parts.append(f"{op_type} {got:g} (graph {want})")
    return Verdict(f"op counts per execute match the graph ({result.variant.name})", ok, ", ".join(parts))


def variant_verdicts(result: VariantResult, npu: bool) -> list[Verdict]:
    name = result.variant.name
    verdicts = [
        file_verdict(result.variant, result.files, npu),
        Verdict(f"measured window ({name})", result.window_ok, result.window),
        checks.check_top_family(result.stats, "matmul", name),
        graph_count_verdict(result),
    ]
    casts = result.per_execute("Cast")
    if name == "default":
        verdicts.append(
            Verdict(
                "Cast present (default)",
                casts > 0,
                f"{casts:g} Cast per execute, {100 * result.share('cast'):.1f}% of op time",
            )
        )
    if name == "fp32":
        verdicts.append(Verdict("Cast absent (fp32)", casts == 0, f"{casts:g} Cast per execute"))
        # Without a precision change the graph is the model itself: 4 MatMul, 3 Gelu per execute.
        verdicts.append(
            checks.check_counts(result.tasks, MEASURED, workload.expected_op_counts(workload.build_model()), name)
        )
    tol = FP16_MAX_ABS_DIFF if result.variant.fp16_compute else FP32_MAX_ABS_DIFF
    verdicts.append(checks.check_output(result.metrics, name, tol, COSINE_MIN))
    return verdicts


# ===== what it means =============================================================================
def fallback_casts(result: VariantResult) -> float:
    return (
        sum(1 for t in result.tasks if t.op_type == "Cast" and t.op_name.startswith(ORT_FALLBACK_CAST_PREFIX))
        / MEASURED
    )


def explain(results: dict[str, VariantResult], npu: bool) -> list[str]:
    """Sentences derived from the numbers: what the comparison shows on this backend."""
    lines = []
    default, fp16_io = results.get("default"), results.get("fp16-io")
    if default:
        lines.append(
            f"default: {default.per_execute('Cast'):g} Cast per execute take {100 * default.share('cast'):.1f}% "
            f"of op time (reference from elsewhere, ATC default on a 910B3: "
            f"Cast {REFERENCE_910B3_SHARE_PCT['Cast']}%)."
        )
        if not npu and fallback_casts(default):
            lines.append(
                f"  {fallback_casts(default):g} of them were added by ONNX Runtime, not by the fp16 conversion: "
                "its CPU provider has no fp16 Gemm/Erf kernels, so it runs those nodes in fp32 and casts "
                "the fp16 weights and constants up on every execute. This backend pays for the policy "
                "without computing in fp16."
            )
    if default and fp16_io:
        removed = default.per_execute("Cast") - fp16_io.per_execute("Cast")
        if removed > 0:
            lines.append(f"fp16-io: {removed:g} fewer Cast per execute than default, as the textbook says.")
        else:
            lines.append(
                f"fp16-io: {fp16_io.per_execute('Cast'):g} Cast per execute, not fewer than default: "
                + (
                    "ONNX Runtime's CPU fallback turns the fp16 input back into fp32 with a Cast of its own, "
                    "so feeding fp16 moves the boundary Cast instead of removing it. On an NPU, which has "
                    "fp16 kernels, --input_fp16_nodes / --output_type=FP16 remove it."
                    if not npu
                    else "ATC kept Casts; check that --input_fp16_nodes names the model's input."
                )
            )
    return lines


def render(results: dict[str, VariantResult], backend: Backend) -> str:
    header = [
        "variant",
        "Cast/execute",
        "Cast share",
        "MatMul share",
        "op time/execute (us)",
        "max abs diff",
        "mean abs diff",
        "cosine",
    ]
    rows = [
        [
            name,
            r.per_execute("Cast"),
            f"{100 * r.share('cast'):.1f}%",
            f"{100 * r.share('matmul'):.1f}%",
            r.execute_us(),
            f"{r.metrics['max_abs_diff']:.3g}",
            f"{r.metrics['mean_abs_diff']:.3g}",
            f"{r.metrics['cosine']:.6f}",
        ]
        for name, r in results.items()
    ]
    top = []
    for name, r in results.items():
        ops = ", ".join(f"{s.op_type} {s.ratio_pct:.1f}%" for s in families.top_ops(r.stats, 4))
        top.append(f"  {name}: {ops}")
    return "\n".join(
        [
            f"Backend: {backend.name} — {WARMUP} warm-up + {MEASURED} measured executes per variant",
            text.render_table(header, rows),
            "Top ops by share of op time:",
            *top,
        ]
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        return worker_main(argv[1:])
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("device", nargs="?", default="0", help="NPU id (default 0; recorded only on portable)")
    parser.add_argument("variant", nargs="?", default="all", help="default, fp16-io, fp32 or all (default all)")
    parser.add_argument(
        "--acl-prof", action="store_true", help="npu: collect in-process with acl.prof instead of msprof"
    )
    args = parser.parse_args(argv)
    device = parse_device_id(args.device)
    variants = parse_variants(args.variant)
    backend = detect()
    print(backend.banner(), flush=True)
    rundir.lock_mode(PROF_OUT.parent)  # one run (or build) of this mode at a time; a second one stops here

    # Everything a user can get wrong is checked before prof_out/ is touched.
    for variant in variants:
        if backend.is_npu:
            if not variant.om_path().is_file():
                raise LabError(
                    f"model file {variant.om_path()} not found", "build it first: bash 03_api_pyAcl/build_model.sh"
                )
        else:
            validate_portable(variant)
    if backend.is_npu:
        select_device(backend, device)

    out = rundir.prepare_output_dir(PROF_OUT)
    info = rundir.start_run(
        out,
        mode=MODE,
        backend=backend.name,
        device=device,
        command=[sys.executable, __file__, *argv],
        variants=[v.name for v in variants],
        warmup_executes=WARMUP,
        measured_executes=MEASURED,
        collection="acl.prof" if args.acl_prof and backend.is_npu else ("msprof" if backend.is_npu else "onnxruntime"),
    )
    reference = workload.reference_output()
    results: dict[str, VariantResult] = {}
    verdicts: list[Verdict] = []
    code = 1
    try:
        for variant in variants:
            variant_dir = out / variant.name
            variant_dir.mkdir()
            print(f"[{variant.name}] {variant.summary}", flush=True)
            raw = None
            if backend.is_npu:
                files, output, acl_prof = collect_npu(variant, variant_dir, backend, device, args.acl_prof)
                graph = om_op_counts(variant.om_json_path())
            else:
                files, output, raw, window, window_ok = collect_portable(variant, variant_dir)
                acl_prof = False
                graph = onnx_op_counts(variant.portable_path())
            tasks, npu_window, npu_ok = read_back(variant, files, backend.is_npu, acl_prof)
            if backend.is_npu:
                window, window_ok = npu_window, npu_ok
            result = VariantResult(
                variant,
                tasks,
                writers.aggregate_op_statistic(tasks),
                graph,
                workload.compare_to_reference(output.astype(np.float32), reference),
                files,
                window,
                window_ok,
                raw,
            )
            results[variant.name] = result
            verdicts += variant_verdicts(result, backend.is_npu)
        print(render(results, backend))
        print("\n".join(explain(results, backend.is_npu)))
        print(text.render_verdicts(verdicts))
        code = 0 if all(v.ok for v in verdicts) else 1
    finally:
        rundir.finish_run(
            out,
            info,
            exit_code=code,
            completed=len(results) == len(variants),
            results={
                name: {
                    "model": str(r.variant.model_path(backend.is_npu)),
                    "cast_per_execute": r.per_execute("Cast"),
                    "cast_share": r.share("cast"),
                    "matmul_share": r.share("matmul"),
                    "accuracy": r.metrics,
                    "graph_op_counts": dict(r.graph_counts),
                    "window": r.window,
                    "files": {k: str(p.relative_to(out)) for k, p in r.files.items()},
                }
                for name, r in results.items()
            },
            verdicts_passed=bool(verdicts) and all(v.ok for v in verdicts),
        )
    print(f"Output: {out}")
    return code


if __name__ == "__main__":
    run_cli(main)
