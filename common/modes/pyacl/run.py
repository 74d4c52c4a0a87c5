"""Mode 03's run (``bash 03_api_pyAcl/run.sh``): each precision variant's offline model under a profiler, and
what the Casts cost.

The lab launches the lesson ``03_api_pyAcl/src/infer.py`` on each variant's model, 3 warm-up and 20 measured
executes: with pyACL under ``msprof`` on an NPU (or profiling itself with ``acl.prof``, option ``--acl-prof``),
with ONNX Runtime's profiler anywhere else (its profile turned into msprof's ``op_summary`` / ``op_statistic``
files here). The report reads them back and compares the variants: Cast ops per execute, their share of op
time, what the converter fused, accuracy against fp32. The model is the workload's (``--workload FILE``;
TinyMLP by default).

What it shows:
- the Cast ops you see come from the offline converter's precision policy, not from your model;
- how to remove them (fp16 IO, or fp32 compute) and what each way costs in accuracy;
- how to keep warm-up executes out of the measured window, and to check counts against the graph.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


from common.analyze import checks, grouping
from common.analyze.checks import variants as variants_checks
from common.collect.flop_count import count_flops
from common.modes.report_files import own_integrity, write_own_report
from common.backend import Backend, detect, parse_device_id, select_device
from common.collect import npu_commands
from common.errors import LabError
from common.formats import readers, writers
from common.modes.lesson import Lesson, main_of
from common.render import text
from common.modes.pyacl.acl_worker import (
    find_export,
    lesson_argv,
    measured_window_npu,
    read_outputs,
    run_step,
    save_inputs,
)
from common.modes.pyacl.build_model import BuildRecord, graph_facts, variant_facts
from common.analyze.flops import flops_not_counted, flops_verdict
from common.modes.pyacl.ort_profile import collect_portable, validate_portable
from common.analyze.variants import VariantResult, explain
from common.modes.pyacl.variant_report import file_verdict, graph_count_verdict, summary
from common.render.variants import render_variants
from common.modes.pyacl.variants import BUILD, MEASURED, MODE_DIR, WARMUP, ModelFiles, Variant, parse_variants
from common.verdict import Verdict, as_record
from common.workload import Expected, compare_outputs, load_workload


# --- 1. profile ------------------------------------------------------------------------------------
def profile_npu(variant: Variant, files: ModelFiles, variant_dir: Path, backend: Backend, device: int, acl_prof: bool):
    """pyACL under msprof: msprof starts the lesson infer.py (``--om ... --no-acl-prof``) and exports its CSVs.

    With ``--acl-prof`` the lesson profiles itself (``--out <variant dir>``): acl.prof.init after the context
    (before the model is loaded), create_config -> start after the warm-up, the measured executes, then
    stop -> destroy_config, and finalize after the unload, before the context and device are released. That
    leaves raw data only, so ``msprof --export`` turns each PROF_* into CSVs.
    """
    msprof = backend.tools["msprof"]
    env_vars = select_device(backend, device)  # a logical id here; the lesson selects it itself
    om, output_npy = files.om_path(variant), variant_dir / "output.npy"
    inputs = save_inputs(variant_dir / "inputs.npz", files.feeds(variant))  # every input, in the variant's dtype
    if acl_prof:
        run_step(
            lesson_argv(om, inputs, output_npy, device=device, out=variant_dir),
            env_vars,
            "the lesson infer.py (acl.prof)",
        )
        for prof_dir in sorted(variant_dir.glob("PROF_*")):  # acl.prof writes raw data; msprof exports it
            run_step(npu_commands.msprof_export_argv(msprof, prof_dir), env_vars, "msprof --export")
    else:
        app = lesson_argv(om, inputs, output_npy, device=device)
        run_step(npu_commands.msprof_argv(msprof, variant_dir, app), env_vars, "msprof")
    found = {name: find_export(variant_dir, name) for name in ("op_summary", "op_statistic")}
    return found, read_outputs(variant, om, output_npy, len(files.output_names))


# --- 2. check: common.analyze.checks.variants judges; what is read here is handed to it ----------------------
def accuracy(variant: Variant, files: ModelFiles, outputs: list[np.ndarray], reference) -> list[dict]:
    """Per output: max/mean abs diff and cosine against the reference, its scale and its tolerance."""
    if len(outputs) != len(reference):
        raise LabError(
            f"the model gave {len(outputs)} outputs, the workload's reference has {len(reference)}",
            f"rebuild the model: {BUILD}",
        )
    return variants_checks.output_accuracy(files.output_names, outputs, reference, variant.fp16_compute)


def execute_disturbance(results: dict[str, VariantResult]) -> list[str]:
    """A 'disturbed' line per variant whose measured executes' op times vary widely: each runs the same graph on
    the same input, so the spread is the machine's, and that variant's figures say less."""
    from common.collect.calibrate import step_disturbance

    out = []
    for name, result in results.items():
        groups = grouping.tasks_by_execute(result.tasks, MEASURED) or []
        line = step_disturbance(
            [sum(t.duration_us for t in g) for g in groups], f"{name}: the {MEASURED} measured executes' op times"
        )
        out += [line] if line else []
    return out


def variant_verdicts(result: VariantResult, expected: Expected, npu: bool) -> list[Verdict]:
    name = result.name
    return [
        file_verdict(name, result.files, npu),
        checks.check_measured_window(name, result.window_ok, result.window),
        graph_count_verdict(result),  # what ran, against the graph the runtime built and ran
        *checks.check_cast_lesson(name, result.tasks, result.stats, MEASURED, expected),
        *checks.check_variant_outputs(name, result.outputs, result.fp16_compute),
    ]


# --- 3. read ---------------------------------------------------------------------------------------
def profile_and_read(
    variant: Variant, files: ModelFiles, variant_dir: Path, run, acl_prof: bool, reference, built: tuple
) -> VariantResult:
    """Profile one variant, read the files back strictly, cut the measured window; ``built``: its built graph's
    ops by type and the converter's changes (build_model.variant_facts)."""
    raw = None
    if run.npu:
        found, outputs = profile_npu(variant, files, variant_dir, run.backend, run.device, acl_prof)
    else:  # the portable window is cut while converting ORT's profile (common.formats.ort_profile.measured_events)
        got = collect_portable(variant, files, variant_dir, run.info.get("threads"))
        found, outputs, raw, window, window_ok = got.files, got.outputs, got.raw_profile, got.window, got.window_ok
    graph, changes = built
    tasks = readers.read_op_summary(found["op_summary"])
    readers.read_op_statistic(found["op_statistic"])  # strict reader: a damaged file stops here
    if run.npu:  # msprof saw the warm-up executes too (acl.prof did not): cut them by execute
        tasks, window, window_ok = measured_window_npu(tasks, acl_prof)
    metrics = compare_outputs([o.astype(np.float32) for o in outputs], reference)
    return VariantResult(
        variant.name,
        variant.fp16_compute,
        MEASURED,
        tasks,
        writers.aggregate_op_statistic(tasks),
        graph,
        metrics,
        accuracy(variant, files, outputs, reference),
        found,
        window,
        window_ok,
        raw,
        changes,
    )


# --- 4. interpret ---------------------------------------------------------------------------------
def interpret(
    results: dict[str, VariantResult], backend: Backend, float_inputs: bool = True, tiny_mlp: bool = True
) -> str:
    """The variants side by side, then what the numbers say about the Casts (common.analyze.variants.explain).

    Read the table row by row: ``default`` pays Casts for fp32 IO around fp16 compute; ``fp16-io``
    moves the input conversion to the caller; ``fp32`` has no Cast and the reference's accuracy.
    Cast share is the time they cost; the accuracy columns are what removing them costs instead;
    the fusions column names what the converter changed in the exported graph.
    """
    table = render_variants(results, backend.name, backend.is_npu, WARMUP, MEASURED)
    return "\n".join([table, *explain(results, backend.is_npu, float_inputs, tiny_mlp)])


def validate(variants: list[Variant], files: ModelFiles, backend: Backend, device: int) -> dict:
    """Everything a user can get wrong is checked before prof_out/ is touched; returns the graph facts the
    checks use (build_model.graph_facts): the build's own when its record vouches for every file, byte for
    byte, else read from the files, each loaded and checked (missing, corrupt, built for another workload)."""
    if backend.is_npu:
        for variant in variants:
            if not files.om_path(variant).is_file():
                raise LabError(f"model file {files.om_path(variant)} not found", f"build it first: {BUILD}")
            files.check_record(files.om_path(variant), files.read_om_record(variant))
    facts = BuildRecord(files, variants, backend, device).facts or graph_facts(files, variants, backend.is_npu)
    if not backend.is_npu:
        for variant in variants:
            validate_portable(variant, files)  # a session opens on it and takes the workload's inputs
    return facts


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    lesson = Lesson("pyacl", MODE_DIR, __doc__, output=False)
    lesson.parser.add_argument("variant", nargs="?", default="all", help="default, fp16-io, fp32 or all (default all)")
    lesson.parser.add_argument("--acl-prof", action="store_true", help="npu: collect with acl.prof, not msprof")
    args = lesson.parse(argv)  # the harness adds --workload FILE and --threads N
    variants = parse_variants(args.variant)
    # Loaded once (load_workload keeps it by file content): start() gets the same one and records it.
    files = ModelFiles(load_workload(args.workload))
    npu = detect().is_npu
    facts: dict = {}

    def check(backend: Backend) -> None:
        facts.update(validate(variants, files, backend, parse_device_id(args.device)))

    run = lesson.start(
        args=args,
        check=check,
        command=[sys.executable, "-m", "common.modes.pyacl", *argv],
        variants=[v.name for v in variants],
        warmup_executes=WARMUP,
        measured_executes=MEASURED,
        collection=("acl.prof" if args.acl_prof else "msprof") if npu else "onnxruntime",
    )
    expected = files.workload.expected()  # the model's reference and EXPECT, computed here; the checks are handed it
    reference = expected.fp32_outputs  # the model itself, or the fp32 copy 03 exported
    # The exported graph against the model, by compute content (FLOPs), once: every variant starts from it.
    exported = facts["exported"]
    try:
        flops = files.workload.forward_flops(count_flops)
    except Exception as err:  # noqa: BLE001 (the user's model under a dispatch mode: say why, never a traceback)
        verdicts: list[Verdict] = [flops_not_counted(f"{type(err).__name__}: {err}")]
    else:
        verdicts = [flops_verdict(flops, exported["flops"], exported["unknown"])]
    holds = checks.check_graph_holds(exported["frozen"])  # the trace kept these values as constants
    verdicts += [holds] if holds else []
    results: dict[str, VariantResult] = {}
    code, body = 1, ""
    try:
        for variant in variants:
            (run.out / variant.name).mkdir()
            print(f"[{variant.name}] {variant.summary}", flush=True)
            results[variant.name] = profile_and_read(
                variant, files, run.out / variant.name, run, args.acl_prof, reference, variant_facts(facts, variant)
            )
            verdicts += variant_verdicts(results[variant.name], expected, run.npu)
        body = interpret(results, run.backend, bool(files.float_inputs), files.workload.path is None)
        disturbed = execute_disturbance(results)
        body = "\n".join([body, *disturbed])
        print(body)
        print(text.render_verdicts(verdicts))
        checked = own_integrity(run.out)
        code = 0 if all(v.ok for v in [*verdicts, *checked.integrity]) else 1
    finally:  # also on an error: run_info.json keeps what was measured, marked incomplete
        models = {v.name: files.model_path(v, run.npu) for v in variants}
        run.finish(
            completed=len(results) == len(variants),
            exit_code=code,
            results=summary(results, run.out, run.npu, models),
            verdicts_passed=bool(verdicts) and code == 0,
            failed_checks=[v.name for v in verdicts if not v.ok],
            checks=[as_record(v) for v in verdicts],
            report_body=body,
            compute_check=(
                {"ok": verdicts[0].ok, "applicable": verdicts[0].applicable, "detail": verdicts[0].detail}
                if verdicts
                else None
            ),
        )
    # written once run_info.json says how the run ended: the page shows that status, not "INCOMPLETE"
    integrity_text, written = write_own_report(run.out, body, verdicts, checked)
    print(integrity_text, *written, sep="\n")
    print(f"Output: {run.out}")
    return code


if __name__ == "__main__":
    main_of(main)
