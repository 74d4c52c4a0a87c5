"""Mode 04, extended: sweep the model's size and watch the step turn from host-bound to compute-bound.

What you will do: profile the same TinyMLP loop as ``model_with_profiler.py`` (same schedule,
same profiler, same files) for a small grid of hidden sizes and batch sizes, and read
Computing : Free from each point's ``step_trace_time.csv``.

What you will learn:
- the host's cost per op is roughly fixed, the device's grows with the work: small models are
  host-bound (Free dominates), large ones compute-bound — where the line is depends on the device;
- a larger batch moves the turning point to smaller models (more work per launch);
- why the TinyMLP of the demo is host-bound on an NPU yet compute-bound on a CPU.

Usage: ``nox -s sweep`` or ``bash 04_pyTorch/run.sh``'s interpreter on
``04_pyTorch/src/sweep.py [device] [--hidden 64,128,...,4096] [--batch 1,32]``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # before torch loads

import torch  # noqa: E402
from model_with_profiler import ACTIVE, MODE_DIR, profile_npu, profile_portable  # noqa: E402

from common.analyze import step_bound  # noqa: E402
from common.backend import detect, parse_device_id, select_device  # noqa: E402
from common.errors import ArgumentParser, LabError, run_cli  # noqa: E402
from common.formats.datasets import find_datasets  # noqa: E402
from common.render.text import render_table  # noqa: E402
from common.formats.rundir import finish_run, prepare_output_dir, start_run  # noqa: E402
from common.workload import N_LINEAR, build_model, make_input  # noqa: E402

HIDDEN = (64, 128, 256, 512, 1024, 2048, 4096)
BATCH = (1, 32)
MAX_HIDDEN = 8192  # 4 x 8192^2 fp32 weights = 1 GiB: past that a laptop swaps
OUT = MODE_DIR / "prof_sweep"


def parse_sizes(text: str, what: str, upper: int) -> tuple[int, ...]:
    """``"64,256"`` -> (64, 256); every value an integer in 1..upper."""
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        values = ()
    if not values or any(not 1 <= v <= upper for v in values):
        raise LabError(f"--{what} {text!r} is not a comma-separated list of integers in 1..{upper}",
                       f"e.g. --{what} {','.join(map(str, HIDDEN if what == 'hidden' else BATCH))}")
    return values


def measure(hidden: int, batch: int, out: Path, npu: bool) -> dict:
    """Profile one grid point with 04's own driver functions; read its step table back from disk."""
    model, x = build_model(hidden), make_input(batch, hidden)
    if npu:
        model, x = model.to("npu"), x.to("npu")  # the current device: main's torch.npu.set_device
    (profile_npu if npu else profile_portable)(model, x, out)
    datasets = [ds for ds in find_datasets(out) if ds.kind == "torch_npu"]
    steps = [s for ds in datasets for s in ds.steps]
    if not steps:
        raise LabError(f"{out}: no step_trace_time.csv rows", "the profiler wrote no steps; see its messages above")
    # The median step, not the mean: on a shared machine one step that lost the CPU to another
    # process would otherwise move a whole grid point.
    step = sorted(steps, key=lambda s: s.total_us)[len(steps) // 2]
    ratio = step.computing_us / step.total_us if step.total_us else 0.0
    flops = 2 * batch * hidden * hidden * N_LINEAR  # the Linear layers' MatMuls, per step
    return {
        "hidden": hidden, "batch": batch, "steps": len(steps), "step_us": step.total_us,
        "computing_us": step.computing_us, "free_us": step.free_us, "computing_ratio": ratio,
        "bound": "host-bound" if ratio < step_bound.HOST_BOUND_BELOW else "compute-bound",
        "matmul_gflops_per_s": flops / step.computing_us / 1e3 if step.computing_us else None,
    }


def turning_points(points: list[dict]) -> list[str]:
    """Per batch: the largest host-bound and the smallest compute-bound hidden size."""
    lines = []
    for batch in sorted({p["batch"] for p in points}):
        row = sorted((p for p in points if p["batch"] == batch), key=lambda p: p["hidden"])
        host = [p["hidden"] for p in row if p["bound"] == "host-bound"]
        compute = [p["hidden"] for p in row if p["bound"] == "compute-bound"]
        if host and compute:
            lines.append(f"batch {batch}: host-bound up to hidden {max(host)}, compute-bound from hidden {min(compute)}")
        else:
            kind = "host-bound" if host else "compute-bound"
            lines.append(f"batch {batch}: {kind} at every hidden size tried ({row[0]['hidden']}..{row[-1]['hidden']})")
    return lines


def render(points: list[dict], backend: str) -> str:
    rows = [[p["hidden"], p["batch"], p["step_us"], p["computing_us"], p["free_us"], 100 * p["computing_ratio"],
             p["bound"], p["matmul_gflops_per_s"]] for p in points]
    return "\n".join([
        f"Sweep ({backend}): the median of {ACTIVE} active steps per point; host-bound when Computing < "
        f"{100 * step_bound.HOST_BOUND_BELOW:.0f}% of the step",
        render_table(["hidden", "batch", "step(us)", "Computing(us)", "Free(us)", "Computing(%)", "verdict",
                      "MatMul GFLOP/s"], rows),
        *turning_points(points),
    ])


def sweep_html(points: list[dict], text: str, info_line: str) -> str:
    from common.render import html

    series: dict[str, list[tuple[int, float]]] = {}
    for p in points:
        series.setdefault(f"batch {p['batch']}", []).append((p["hidden"], p["computing_ratio"]))
    table = [[p["hidden"], p["batch"], p["step_us"], p["computing_us"], p["free_us"], 100 * p["computing_ratio"],
              p["bound"]] for p in points]
    return html.page("msprof lab: 04 sweep", info_line, [
        html.section("Computing share of the step vs model size",
                     html.sweep_chart("sweep", series, step_bound.HOST_BOUND_BELOW),
                     note=" ".join(turning_points(points))),
        html.section("Points", html.table(["hidden", "batch", "step(us)", "Computing(us)", "Free(us)",
                                           "Computing(%)", "verdict"], table)),
        html.section("As printed", f"<pre>{html.esc(text)}</pre>"),
    ])


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="04_pyTorch/src/sweep.py", description=__doc__.splitlines()[0])
    parser.add_argument("device", nargs="?", default="0", help="NPU device id, 0..63 (default 0)")
    parser.add_argument("--hidden", default=",".join(map(str, HIDDEN)), help="hidden sizes (default %(default)s)")
    parser.add_argument("--batch", default=",".join(map(str, BATCH)), help="batch sizes (default %(default)s)")
    parser.add_argument("--threads", type=int, default=1,
                        help="portable: CPU threads for torch (default 1; 0 = torch's default)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not 0 <= args.threads <= 1024:
        raise LabError(f"--threads {args.threads} is not in 0..1024", "e.g. --threads 1, or 0 for torch's default")
    hiddens = parse_sizes(args.hidden, "hidden", MAX_HIDDEN)
    batches = parse_sizes(args.batch, "batch", 4096)

    backend = detect()
    print(backend.banner(), flush=True)
    device = parse_device_id(args.device)
    select_device(backend, device)  # a logical device id here (one line naming the valid ids otherwise)
    if backend.is_npu:
        import torch_npu  # noqa: F401

        torch.npu.set_device(device)  # the program selects the device; msprof profiles the one in use
    out = prepare_output_dir(OUT)
    info = start_run(out, mode="sweep", backend=backend.name, device=device, command=sys.argv,
                     grid={"hidden": list(hiddens), "batch": list(batches)}, threads=args.threads or None)
    # One thread by default: a parallel op waits for its slowest thread, and on a machine shared
    # with other work a thread that loses its core costs a whole scheduler slice (we saw ~3 ms per
    # op), which would bury the few hundred microseconds of host time this sweep is about.
    if not backend.is_npu and args.threads:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    points = []
    torch.set_grad_enabled(False)
    for batch in batches:
        for hidden in hiddens:
            point_dir = out / f"h{hidden}_b{batch}"
            point_dir.mkdir()
            point = measure(hidden, batch, point_dir, backend.is_npu)
            print(f"hidden {hidden:5d} batch {batch:3d}: Computing {100 * point['computing_ratio']:5.1f}% "
                  f"of {point['step_us']:,.0f} us ({point['bound']})", flush=True)
            points.append(point)
    finish_run(out, info, exit_code=0, completed=True)
    text = render(points, backend.name if backend.is_npu else f"portable, {threads} CPU thread{'s' * (threads > 1)}")
    print(text)
    doc = {"backend": backend.name, "threads": threads, "start": info["start"], "host": info["host"], "points": points}
    (out / "sweep.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / "sweep.md").write_text(f"# 04 sweep\n\n```\n{text}\n```\n")
    line = f"backend: {backend.name.upper()} | host {info['host']} | {info['start']}"
    (out / "report.html").write_text(sweep_html(points, text, line))
    print(f"(written to {out / 'sweep.json'}, {out / 'sweep.md'} and {out / 'report.html'})")
    return 0


if __name__ == "__main__":
    run_cli(main)
