"""One side of a finding -> fix pair, run once: the lesson launched as a user runs it (with the fix's flag, or
without), what it wrote read back through the lab's own conversions, and the figures the pair is judged on.

Every run is a separate process with one intra-op thread, as the modes run their lessons: before and after
differ by the fix alone.
"""

from __future__ import annotations

import os
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from common.analyze.bounds import step as step_bound
from common.collect import launcher
from common.collect.torch_trace import convert_raw_trace, raw_trace
from common.errors import LabError
from common.formats.datasets import find_datasets
from common.formats.outputs import load_numbered_outputs, load_output
from common.formats.rundir import finish_run, start_run
from common.modes import lesson_file

TIMEOUT_S = 600.0  # one lesson run; a TinyMLP step takes milliseconds, a user's large model may take minutes
ORT_WARMUP, ORT_MEASURED = 3, 20  # the 03 lesson's defaults: executes thrown away, executes timed


@dataclass(frozen=True)
class Sample:
    """One run of one side: its metric, its own verdict line, what it computed, and facts a finding reads."""

    value: float  # the pair's metric for this run (a median over the run's steps or executes)
    verdict: str  # the run's own verdict line: the finding before the fix, what it became after
    folder: Path
    output: list[np.ndarray] | None = None  # the model's output, or the training losses: the precision re-check
    facts: dict = field(default_factory=dict)


def _env() -> dict[str, str]:
    """The lessons' environment: one intra-op thread (as the modes' default), the profiler's logging quiet, gloo on
    the loopback interface (two ranks on this machine: nothing leaves it)."""
    return {
        "GLOO_SOCKET_IFNAME": "lo",
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "KINETO_LOG_LEVEL": "5",
    }


def _launch(argv: list[object], folder: Path, extra: dict[str, str] | None = None) -> str:
    run = launcher.run_command(
        [str(a) for a in argv],
        {**_env(), **(extra or {})},
        TIMEOUT_S,
        capture=True,
        stderr=folder / "lesson_stderr.txt",
    )
    run.raise_if_stopped()
    if not run.ok:
        said = (folder / "lesson_stderr.txt").read_text(errors="replace").strip().splitlines()
        program = next((Path(str(a)).name for a in argv if str(a).endswith(".py")), Path(str(argv[0])).name)
        raise LabError(
            f"{program} {run.describe} in {folder}: {said[-1] if said else 'no message'}",
            "run the same lesson command by hand to see its whole output (the argv is in run_info.json)",
        )
    return run.output


def _record(folder: Path, argv: list[object], samples: int | None, workload: dict | None) -> dict:
    return start_run(
        folder,
        mode="fix",
        backend="portable",
        device=0,
        command=[str(a) for a in argv],
        lesson=[str(a) for a in argv[1:]],
        threads=1,
        workload=workload,
        **({"samples": samples} if samples else {}),
    )


def pytorch_side(
    folder: Path, model_file: Path, flags: list[str], *, train: bool, samples: int, workload: dict | None = None
) -> Sample:
    """The 04 lesson on ``model_file`` with ``flags`` (a fix's, or none): its steps read back, the median step per
    sample as the metric, the median step's verdict (host-, compute-bound) as the finding."""
    raw = folder / "torch_profiler"
    argv = [
        sys.executable,
        lesson_file("04_pyTorch", "model_with_profiler.py"),
        "--out",
        raw,
        "--device",
        "cpu",
        "--model",
        model_file,
        *(["--train"] if train else []),
        "--save-output",
        folder / "output.npy",
        *flags,
    ]
    info = _record(folder, argv, samples, workload)
    _launch(argv, folder)
    trace = raw_trace(raw)
    if trace is None:
        raise LabError(f"{raw}: the lesson wrote no torch.profiler trace", "see lesson_stderr.txt beside it")
    convert_raw_trace(trace, folder)
    datasets = [ds for ds in find_datasets(folder) if ds.kind == "torch_npu"]
    steps = [s for ds in datasets for s in ds.steps]
    if not steps:
        raise LabError(f"{folder}: no steps in the converted trace", "the lesson's schedule recorded nothing")
    summary = step_bound.summarize_steps(steps)
    verdict = step_bound.step_verdict(summary)
    ops = {t.op_type for ds in datasets for t in ds.tasks}
    finish_run(folder, info, exit_code=0, completed=True)
    saved = load_output(folder / "output.npy")
    return Sample(
        summary.median_step_us / samples,
        verdict.text,
        folder,
        [a.astype(np.float64) for a in saved] if saved else None,
        {"kind": verdict.kind, "ops": sorted(ops), "median_step_us": summary.median_step_us, "steps": len(steps)},
    )


def onnx_side(
    folder: Path, onnx: Path, inputs: Path, flags: list[str], *, samples: int, workload: dict | None = None
) -> Sample:
    """The 03 lesson on an ONNX file under ONNX Runtime with ``flags``: the median measured execute per sample as
    the metric, the nodes one execute ran as the finding (what ran unfused)."""
    from common.formats.ort_profile import load_profile, measured_events, run_of
    from common.modes.pyacl.ort_profile import PROFILE_LINE

    argv = [
        sys.executable,
        lesson_file("03_api_pyAcl", "infer.py"),
        "--onnx",
        onnx,
        "--inputs",
        inputs,
        "--out",
        folder,
        "--save-output",
        folder / "output.npy",
        "--threads",
        "1",
        "--warmup",
        ORT_WARMUP,
        "--measured",
        ORT_MEASURED,
        *flags,
    ]
    info = _record(folder, argv, samples, workload)
    said = _launch(argv, folder)
    found = PROFILE_LINE.search(said)
    if found is None or not Path(found["file"]).is_file():
        raise LabError(f"{folder}: the lesson named no ONNX Runtime profile", "see lesson_stderr.txt beside it")
    profile = load_profile(Path(found["file"]))
    measured = profile.runs[ORT_WARMUP:]
    events = measured_events(profile, ORT_WARMUP, ORT_MEASURED)
    first = [e for e in events if run_of(e, profile.runs) == ORT_WARMUP]
    kinds: dict[str, int] = {}
    for e in first:
        kind = str(e.get("args", {}).get("op_name", "?"))
        kinds[kind] = kinds.get(kind, 0) + 1
    execute_us = statistics.median(r.end_us - r.start_us for r in measured)
    listed = ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
    verdict = f"{len(first)} nodes per execute: {listed}; median execute {execute_us:,.1f} us"
    finish_run(folder, info, exit_code=0, completed=True)
    outputs = load_numbered_outputs(folder / "output.npy")  # as the lesson infer.py saves them
    return Sample(
        execute_us / samples,
        verdict,
        folder,
        [a.astype(np.float64) for a in outputs] or None,
        {"nodes": len(first), "node_kinds": kinds},
    )


def ddp_lesson_side(
    folder: Path, model_file: Path | None, flags: list[str], *, samples: int, workload: dict | None = None
) -> Sample:
    """The DDP lesson as a user starts it (torchrun, two CPU ranks, gloo) with ``flags``: each rank's trace read
    through the lab's conversion, the slowest rank's median step per sample as the metric, the median step's
    verdict over every rank's steps (how much of it is Communication(Not Overlapped)) as the finding."""
    from common.analyze.slow_rank import rank_summaries
    from common.collect.torch_trace import convert_rank_traces, raw_traces
    from common.formats.cluster import load_cluster

    raw = folder / "torch_traces"
    argv = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        lesson_file("04_pyTorch", "ddp_with_profiler.py"),
        "--out",
        raw,
        "--devices",
        "cpu",
        *(["--model", model_file] if model_file else []),
        *flags,
    ]
    info = _record(folder, argv, samples, workload)
    _launch(argv, folder)
    convert_rank_traces(raw_traces(raw), folder)
    finish_run(folder, info, exit_code=0, completed=True)
    view = load_cluster(folder)
    summary = step_bound.summarize_steps([s for rows in view.steps.values() for s in rows])
    verdict = step_bound.step_verdict(summary)
    slowest = max(r.step_us for r in rank_summaries(view))
    return Sample(slowest / samples, verdict.text, folder, None, {"kind": verdict.kind, "shares": verdict.shares})


def ddp_side(folder: Path, flags: list[object], *, samples: int) -> Sample:
    """The DDP lesson on two ranks (the lab's torchrun driver, gloo) with ``flags``: the slowest rank's median step
    per sample as the metric, the cluster view's slow-rank line as the finding. ``folder``: inside 04_pyTorch/."""
    from common.analyze.slow_rank import find_slow_rank, rank_summaries
    from common.formats.cluster import load_cluster

    argv = [sys.executable, "-m", "common.modes.pytorch.ddp", "2", "--output", folder, *flags]
    folder.parent.mkdir(parents=True, exist_ok=True)
    _launch(argv, folder.parent)
    ranks = rank_summaries(load_cluster(folder))
    slow = find_slow_rank(ranks)
    return Sample(
        max(r.step_us for r in ranks) / samples, slow.text, folder, None, {"slow_rank": slow.rank, "ranks": len(ranks)}
    )


# 02's kernel on the twin: the launches the mode runs (warm-up first, not measured), built once per tiling variant
KERNEL_WARMUP, KERNEL_LAUNCHES = 3, 20


def build_kernel_variant(build: Path, tiling: dict[str, int]) -> Path:
    """02's CMake project built for the twin with ``tiling`` (``{"TILE_NUM": 2}`` ...) as a user builds a variant:
    ``cmake -S src -B build -DRUN_MODE=portable ... -DTILE_NUM=2``; the binary, built once per folder."""
    from common.modes.ascendc import SRC_DIR
    from common.modes.ascendc.build_kernel import (
        BINARY_NAME,
        cmake_build_argv,
        cmake_configure_argv,
        cmake_step,
        find_cmake,
        find_cxx,
    )

    binary = build / BINARY_NAME
    if binary.is_file():
        return binary
    cmake = find_cmake()
    configure = cmake_configure_argv(cmake, SRC_DIR, build, "portable", cxx=find_cxx())
    configure += [f"-D{name}={value}" for name, value in tiling.items()]
    build.parent.mkdir(parents=True, exist_ok=True)
    for step, argv in (("configure", configure), ("build", cmake_build_argv(cmake, build, os.cpu_count() or 1))):
        log = build.parent / f"{build.name}.{step}.log"
        if not cmake_step(argv, log):
            raise LabError(f"cmake's {step} of 02's kernel with {tiling} failed", f"see {log}")
    return binary


def kernel_side(folder: Path, binary: Path) -> Sample:
    """02's kernel built for the twin, launched as the mode launches it with its timers on: the median per-block
    kernel time of the measured launches as the metric, the scalar part's share of it (the per-tile loop,
    addresses and queue handshakes) as the finding. The program checks every output element itself."""
    from common.modes.ascendc.kernel_report import read_sizes
    from common.formats.twin_timings import parse_twin_timings
    from common.modes.ascendc.twin_profile import TIMINGS_VAR

    timings = folder / "twin_timings.csv"
    argv = [binary, "--warmup", KERNEL_WARMUP, "--launches", KERNEL_LAUNCHES]
    info = _record(folder, argv, 1, None)
    said = _launch(argv, folder, {TIMINGS_VAR: str(timings)})
    launches = parse_twin_timings(timings)[KERNEL_WARMUP:]
    if not launches:
        raise LabError(f"{timings}: the twin timed no measured launch", "see lesson_stderr.txt beside it")
    sizes = read_sizes(said) or {}
    block_us = statistics.median(x.aiv_time_us for x in launches)
    parts = {
        p: statistics.median(x.pipe_us[p] / x.aiv_time_us for x in launches if x.aiv_time_us)
        for p in ("scalar", "vec", "mte2", "mte3")
    }
    tiles = f"{sizes.get('tile_num', '?')} x {sizes.get('buffer_num', '?')} tiles of {sizes.get('tile_length', '?')}"
    verdict = (
        f"scalar {parts['scalar']:.0%} of the kernel's {block_us:.2f} us per block (vec {parts['vec']:.0%}, "
        f"mte2 {parts['mte2']:.0%}, mte3 {parts['mte3']:.0%}); {tiles} elements per core"
    )
    finish_run(folder, info, exit_code=0, completed=True)
    return Sample(block_us, verdict, folder, None, {"shares": parts, "sizes": sizes})
