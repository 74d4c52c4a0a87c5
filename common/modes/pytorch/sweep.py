"""Mode 04, extended: sweep the model's size and watch the step turn from host-bound to compute-bound.

What you will do: run the lesson ``04_pyTorch/src/model_with_profiler.py`` (same schedule, same
profiler, same files) over a small grid of sizes, each point a model file of its own, and read
Computing : Free from each point's ``step_trace_time.csv``. TinyMLP (the default workload) is swept over hidden size x batch; any
other workload (``--workload FILE``) over its batch: the first dimension of ``make_input()``.

What you will learn:
- the host's cost per op is roughly fixed, the device's grows with the work: small models are
  host-bound (Free dominates), large ones compute-bound — where the line is depends on the device;
- a larger batch moves the turning point to smaller models (more work per launch);
- to check a throughput figure against the device's peak before believing it.

Usage: ``nox -s sweep [-- --workload FILE]`` or the lab's interpreter on ``-m common.modes.pytorch.sweep
[device] [--hidden 64,128,...,4096] [--batch 1,32] [--workload FILE]``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # before torch loads

import torch  # noqa: E402

from common.analyze.bounds import step as step_bound  # noqa: E402
from common.analyze.robust import estimate  # noqa: E402
from common.backend import soc_version  # noqa: E402
from common.errors import LabError  # noqa: E402
from common.formats.datasets import find_datasets  # noqa: E402
from common.modes.lesson import Lesson, main_of  # noqa: E402
from common.modes.pytorch import (
    ACTIVE,
    MODE_DIR,
    TORCH_TRACE_DIR,
    WAIT,
    WARMUP,
    convert_portable,  # noqa: E402
    device_arg,
    launch,
    lesson_argv,
)
from common.render.html import report_page  # noqa: E402
from common.render.sweep import sweep_report  # noqa: E402
from common.render.text import render_markdown, render_text  # noqa: E402
from common.workload import build_model, load_workload, make_input  # noqa: E402

HIDDEN = (64, 128, 256, 512, 1024, 2048, 4096)
BATCH = (1, 32)  # TinyMLP's batches; another workload's default batches: BATCH_ANY
BATCH_ANY = (1, 4, 16, 64)
MAX_HIDDEN = 8192  # 4 x 8192^2 fp32 weights = 1 GiB: past that a laptop swaps
MAX_BATCH = 4096
OUT = MODE_DIR / "prof_sweep"


def parse_sizes(text: str, what: str, upper: int, default: tuple[int, ...]) -> tuple[int, ...]:
    """``"64,256"`` -> (64, 256); every value an integer in 1..upper."""
    values = tuple(int(v) for v in text.split(",")) if all(v.strip().isdigit() for v in text.split(",")) else ()
    if not values or any(not 1 <= v <= upper for v in values):
        raise LabError(
            f"--{what} {text!r} is not a comma-separated list of integers in 1..{upper}",
            f"e.g. --{what} {','.join(map(str, default))}",
        )
    if twice := sorted({v for v in values if values.count(v) > 1}):
        raise LabError(
            f"--{what} {text!r} names {', '.join(map(str, twice))} more than once",
            "give each size once: every point of the sweep is profiled once",
        )
    return values


def batched(work, batch: int) -> tuple:
    """The workload's input with its first dimension (the batch) scaled to ``batch``: its samples repeated.

    Repeating keeps the values valid (token ids stay token ids); the profile depends on shapes only.
    A model that takes no batch dimension there is refused with the reason.
    """
    inputs = work.inputs()
    firsts = {tuple(t.shape)[:1] for t in inputs}
    shapes = ", ".join(str(tuple(t.shape)) for t in inputs)
    fix = f"profile it at its own size instead: nox -s pytorch -- 0 --workload {work.path}"
    if len(firsts) != 1 or firsts == {()} or firsts == {(0,)}:
        raise LabError(
            f"{work.where}: the sweep scales the first input dimension as the batch, but make_input() "
            f"gives {shapes}: no first dimension common to every input",
            fix,
        )
    n = next(iter(firsts))[0]
    scaled = tuple(t.repeat(-(-batch // n), *[1] * (t.dim() - 1))[:batch] for t in inputs)
    try:
        with torch.no_grad():
            work.forward(work.build_model(), scaled)
    except Exception as err:  # noqa: BLE001 (the user's model: any failure is a refusal)
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise LabError(
            f"{work.where}: the model rejects batch {batch} (make_input()'s first dimension {n} "
            f"scaled, shapes {shapes}): {type(err).__name__}: {reason}",
            fix,
        ) from None
    return scaled


def counted_flops(model, x: tuple) -> tuple[float, list[str]]:
    """FLOPs of one forward (common.collect.flop_count.count_flops: torch's FLOP counter formulas for matmul,
    convolution and attention kernels, hand formulas for the fused MHA / encoder layer) and the ops of a
    FLOP family it has no formula for (an RNN layer: aten::mkldnn_rnn_layer). TinyMLP: 2*b*h*h*4."""
    from common.analyze.flops import FLOP_FAMILIES, uncounted_in
    from common.collect.flop_count import count_flops

    count = count_flops(model, x)
    return sum(count.per_family.values()), uncounted_in(count, FLOP_FAMILIES)


def shape_flops(tasks: list, ops: list[str], steps: int) -> tuple[float, list[str], list[str]]:
    """FLOPs per step of the ``ops`` torch's counter has no formula for, from their profiled shapes with the
    bounds table's work models (the recurrent one for an LSTM layer): (FLOPs, ops found, ops without a model
    and why). Matched by exact name, so nothing the counter already counted is added twice."""
    from common.analyze.bounds.op import op_work

    total, found, missing = 0.0, set(), {}
    for t in tasks:
        if t.op_type in ops:
            work = op_work(t)
            if isinstance(work, str):
                missing[t.op_type] = work
            else:
                total += work.flops
                found.add(t.op_type)
    missing.update({op: "not in the profile" for op in ops if op not in found and op not in missing})
    return total / steps if steps else 0.0, sorted(found), [f"{op} ({why})" for op, why in sorted(missing.items())]


# One grid point's model for the lesson's --model: TinyMLP at a hidden size, or the user's workload with its
# batch scaled (as batched() does; the seeds are the lesson's: 0 before build_model(), 1 before make_input()).
TINY_MLP_POINT = """import torch

def build_model():
    layers = [torch.nn.Linear({h}, {h})]
    for _ in range(3):
        layers += [torch.nn.GELU(), torch.nn.Linear({h}, {h})]
    return torch.nn.Sequential(*layers)

def make_input():
    return torch.randn({b}, {h}, generator=torch.Generator().manual_seed(1))
"""
WORKLOAD_POINT = """import importlib.util

_spec = importlib.util.spec_from_file_location("sweep_workload", {path!r})
_work = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_work)

def build_model():
    return _work.build_model()

def make_input():
    x = _work.make_input()
    items = tuple(x) if isinstance(x, (tuple, list)) else (x,)
    scaled = tuple(t.repeat(-(-{b} // t.shape[0]), *[1] * (t.dim() - 1))[:{b}] for t in items)
    return scaled if len(scaled) > 1 else scaled[0]
"""


def point_model(folder: Path, batch: int, hidden: int | None, work) -> Path:
    """``<folder>/model.py``: the grid point as a model file the lesson loads with --model."""
    path = folder / "model.py"
    text = (
        TINY_MLP_POINT.format(h=hidden, b=batch)
        if hidden is not None
        else WORKLOAD_POINT.format(path=str(Path(work.path).resolve()), b=batch)
    )
    path.write_text(text)
    return path


def measure(run, model, x: tuple, out: Path, model_file: Path) -> dict:
    """Profile one grid point with mode 04's lesson; read its step table back from disk."""
    flops, uncounted = counted_flops(model, x)
    raw = out if run.npu else out / TORCH_TRACE_DIR  # torch_npu writes *_ascend_pt/ itself
    launch(run, lesson_argv("model_with_profiler.py", "--out", raw, "--device", device_arg(run), "--model", model_file))
    if not run.npu:
        convert_portable(run, raw, WAIT, WARMUP, ACTIVE, into=out)
    datasets = [ds for ds in find_datasets(out) if ds.kind == "torch_npu"]
    steps = [s for ds in datasets for s in ds.steps]
    if not steps:
        raise LabError(f"{out}: no step_trace_time.csv rows", "the profiler wrote no steps; see its messages above")
    extra, from_shapes, unmodelled = (
        shape_flops([t for ds in datasets for t in ds.tasks], uncounted, len(steps)) if uncounted else (0.0, [], [])
    )
    flops += extra
    # The median step, not the mean: on a shared machine one step that lost the CPU to another
    # process would otherwise move a whole grid point.
    step = sorted(steps, key=lambda s: s.total_us)[len(steps) // 2]
    ratio = step.computing_us / step.total_us if step.total_us else 0.0
    # the verdict changes at HOST_BOUND_BELOW: a point whose steps' Computing shares straddle it is undecided
    spread = estimate([s.computing_us / s.total_us for s in steps if s.total_us]) or estimate([ratio])
    bound = (
        "undecided"
        if spread.q1 < step_bound.HOST_BOUND_BELOW <= spread.q3
        else "host-bound"
        if ratio < step_bound.HOST_BOUND_BELOW
        else "compute-bound"
    )
    return {
        "steps": len(steps),
        "step_us": step.total_us,
        "computing_us": step.computing_us,
        "free_us": step.free_us,
        "computing_ratio": ratio,
        "computing_ratio_iqr": [spread.q1, spread.q3],
        "bound": bound,
        "flops": flops,
        "gflops_per_s": flops / step.computing_us / 1e3 if flops and step.computing_us else None,
        "flops_from_shapes": from_shapes,
        "flops_missing": unmodelled,
    }


def peak_flops(backend, device: int) -> tuple[float | None, str]:
    """The device's FLOP/s peak: the SoC table on an NPU, a calibration of this CPU (at the sweep's threads)."""
    from common.analyze.bounds.op import device_peaks
    from common.collect.calibrate import calibrate

    if not backend.is_npu:
        return calibrate().flops_per_s, f"calibrated fp32 GEMM on {calibrate().name}"
    peaks = device_peaks(soc := soc_version(backend, device))
    return (peaks.flops_per_s, f"{peaks.name} table: {peaks.source}") if peaks else (None, f"{soc} not in the table")


def main(argv: list[str] | None = None) -> int:
    lesson = Lesson("sweep", MODE_DIR, __doc__, output=False, prog="nox -s sweep --")  # + --workload, --threads
    lesson.parser.add_argument("--hidden", help=f"TinyMLP's hidden sizes (default {','.join(map(str, HIDDEN))})")
    lesson.parser.add_argument(
        "--batch",
        help=f"batch sizes (default {','.join(map(str, BATCH))} for TinyMLP, "
        f"{','.join(map(str, BATCH_ANY))} for another workload)",
    )
    args = lesson.parse(argv)
    work = load_workload(args.workload)  # a bad file stops here, before anything is touched
    mlp = work.path is None  # TinyMLP: its size is a parameter; any other model keeps its own
    if not mlp and args.hidden:
        raise LabError(
            f"--hidden sizes TinyMLP's layers; {work.name} has no hidden size the sweep can change",
            f"sweep its batch: --batch {','.join(map(str, BATCH_ANY))}",
        )
    hiddens = parse_sizes(args.hidden or ",".join(map(str, HIDDEN)), "hidden", MAX_HIDDEN, HIDDEN) if mlp else (None,)
    default = BATCH if mlp else BATCH_ANY
    batches = parse_sizes(args.batch or ",".join(map(str, default)), "batch", MAX_BATCH, default)
    grid = [(b, h, None if mlp else batched(work, b)) for b in batches for h in hiddens]  # refusals come first

    # Banner, logical device, threads (one by default: a parallel op waits for its slowest thread, and
    # on a shared machine a thread that loses its core costs a scheduler slice, ~3 ms per op in our
    # runs, which would bury the few hundred microseconds of host time this sweep is about), mode 04's
    # lock (the sweep runs its functions), a fresh prof_sweep/ and run_info.json.
    run = lesson.start(args=args, out=OUT, grid={"hidden": list(hiddens) if mlp else None, "batch": list(batches)})
    backend, device, out, info = run.backend, run.device, run.out, run.info
    threads = torch.get_num_threads()
    peak, peak_source = peak_flops(backend, device)  # portable: calibrated now, at the sweep's thread count
    points = []
    torch.set_grad_enabled(False)
    for batch, hidden, x in grid:
        model, x = (build_model(hidden), (make_input(batch, hidden),)) if mlp else (work.build_model(), x)
        point_dir = out / (f"h{hidden}_b{batch}" if mlp else f"b{batch}")
        point_dir.mkdir()
        point = {
            "series": f"batch {batch}" if mlp else work.name,
            "hidden": hidden,
            "batch": batch,
            **measure(run, model, x, point_dir, point_model(point_dir, batch, hidden if mlp else None, work)),
        }
        point["above_peak"] = bool(peak and point["gflops_per_s"] and point["gflops_per_s"] * 1e9 > peak)
        print(
            f"{f'hidden {hidden:5d} ' if mlp else ''}batch {batch:4d}: Computing "
            f"{100 * point['computing_ratio']:5.1f}% of {point['step_us']:,.0f} us ({point['bound']})",
            flush=True,
        )
        points.append(point)
    run.finish(completed=True)
    x_axis = "hidden" if mlp else "batch"
    name = backend.name if backend.is_npu else f"portable, {threads} CPU thread{'s' * (threads > 1)}"
    line = f"backend: {backend.name.upper()} | workload {work.name} | host {info['host']} | {info['start']}"
    report = sweep_report(points, f"{work.name}, {name}", x_axis, peak, peak_source, ACTIVE, line)
    print(render_text(report))
    doc = {
        "backend": backend.name,
        "threads": threads,
        "start": info["start"],
        "host": info["host"],
        "workload": work.info(),
        "x": x_axis,
        "peak_gflops_per_s": peak / 1e9 if peak else None,
        "peak_source": peak_source,
        "points": points,
    }
    (out / "sweep.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / "sweep.md").write_text(render_markdown(report))
    (out / "report.html").write_text(report_page(report))
    print(f"(written to {out / 'sweep.json'}, {out / 'sweep.md'} and {out / 'report.html'})")
    return 0


if __name__ == "__main__":
    main_of(main)
