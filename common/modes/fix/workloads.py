"""Which model each pair runs on, and when its finding fires: TinyMLP's own set-up by default, the user's model
with ``--workload FILE``.

By default the host-bound pair runs TinyMLP at hidden 64 and batch 1 (the sweep's host-bound corner), the
training pair TinyMLP with a mean-square loss (its file defines none), and the graph pair the transformer block
(TinyMLP's export gives ONNX Runtime nothing to fuse). With ``--workload`` every pair runs the
user's model as its file defines it, and a pair whose finding does not fire there is skipped, saying why.
"""

from __future__ import annotations

from pathlib import Path

from common.analyze.bounds.step import MIXED_PART_SHARE
from common.errors import LabError
from common.modes import ROOT
from common.modes.fix.sides import (
    Sample,
    build_kernel_variant,
    ddp_lesson_side,
    ddp_side,
    kernel_side,
    onnx_side,
    pytorch_side,
)
from common.modes.pytorch.sweep import TINY_MLP_POINT, WORKLOAD_POINT
from common.workload import load_workload

TINY_MLP = ROOT / "workloads" / "tiny_mlp.py"
# TinyMLP's export has nothing for ONNX Runtime to fuse (its Linear layers export as Gemm already): the graph pair's
# default model is the transformer block, whose 3-D Linear layers export as MatMul + Add
GRAPH_DEFAULT = ROOT / "workloads" / "transformer.py"
TRAINABLE_TINY = """\"\"\"TinyMLP with a mean-square loss, so its training step can be profiled (nox -s fix).\"\"\"
import importlib.util

_spec = importlib.util.spec_from_file_location("tiny_mlp", {path!r})
_tiny = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_tiny)
build_model, make_input = _tiny.build_model, _tiny.make_input


def loss(output, x):
    return (output - x).pow(2).mean()
"""
BATCH_FACTOR = 4  # the batch pair's fix on a user's model: this many times its own batch
ACCUMULATE = 4  # the accumulation pair's fix: micro-batches per step, one all-reduce per step
SLOW_FACTOR = 3  # the slow rank's batch, in batches of the others: 3 and 1 rebalance evenly to 2 and 2
FUSED_OP = "_fused_sgd"  # what a fused SGD step records (aten::_fused_sgd_)
TILES_LESSON, TILES_FIXED = 8, 2  # 02's TILE_NUM as the lesson sets it, and the fix
SCALAR_SHARE = 0.25  # the lab's estimate: a part of a quarter is one the kernel's verdict names (as the step's)


def _write(folder: Path, name: str, text: str) -> Path:
    """A model file the lesson loads with --model, written into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def _fires_kind(kind: str):
    return lambda s: s.facts.get("kind") == kind


def plan(workload: str | None, chosen: set[str], models: Path, ddp_runs: Path) -> tuple[dict, dict[str, str]]:
    """{pair name: (side, fires)} for the ``chosen`` pairs that can run on this workload, and {pair name: why not}
    for the others. ``side(folder, fixed)`` runs one side once; ``fires(baseline sample)`` says whether the finding
    fired."""
    work = load_workload(workload) if workload else load_workload(TINY_MLP)
    model = Path(work.path).resolve() if workload else TINY_MLP
    samples = work.samples or 1
    sides: dict = {}
    skipped: dict[str, str] = {}

    def step_side(file: Path, flags: list[str], n: int, n_fixed: int, train: bool = False):
        def run(folder: Path, fixed: bool) -> Sample:
            return pytorch_side(
                folder, file, flags if fixed else [], train=train, samples=n_fixed if fixed else n, workload=work.info()
            )

        return run

    if workload:
        fixed_batch = samples * BATCH_FACTOR
        sides["batch"] = (
            step_side(model, ["--batch", str(fixed_batch)], samples, fixed_batch),
            _fires_kind("host-bound"),
        )
    else:  # the sweep's host-bound corner, as the sweep writes its grid points
        corner = _write(models, "tiny_mlp_h64_b1.py", TINY_MLP_POINT.format(h=64, b=1))
        sides["batch"] = (step_side(corner, ["--batch", "32"], 1, 32), _fires_kind("host-bound"))
    for precision in ("bf16", "fp16"):
        if work.precision != "fp32":
            skipped[precision] = (
                f"the model already runs in {work.precision}: python -m common precision shows its cost"
            )
        else:
            sides[precision] = (
                step_side(model, ["--precision", precision], samples, samples),
                _fires_kind("compute-bound"),
            )
    if workload and work.loss is None:
        skipped["fused-optimizer"] = f"{work.where} defines no loss(): no training step to profile"
    else:
        trainable = (
            model if workload else _write(models, "tiny_mlp_train.py", TRAINABLE_TINY.format(path=str(TINY_MLP)))
        )
        sides["fused-optimizer"] = (
            step_side(trainable, ["--fused-optimizer"], samples, samples, train=True),
            lambda s: not any(FUSED_OP in op for op in s.facts.get("ops", [])),
        )
    if "graph-optimization" in chosen:  # the export takes seconds: only for a run that asks for the pair
        graph = _graph_pair(work if workload else load_workload(GRAPH_DEFAULT), models)
        if isinstance(graph, str):
            skipped["graph-optimization"] = graph
        else:
            sides["graph-optimization"] = graph
    if workload and work.loss is None:
        skipped["accumulate"] = f"{work.where} defines no loss(): no training step to profile"
    else:
        per_rank = max(1, samples // 2) if workload else 32  # the lesson splits the batch over its 2 ranks

        def accumulate(folder: Path, fixed: bool) -> Sample:
            return ddp_lesson_side(
                folder,
                model if workload else None,
                ["--accumulate", str(ACCUMULATE)] if fixed else [],
                samples=per_rank * (ACCUMULATE if fixed else 1),
                workload=work.info(),
            )

        # fires when the all-reduce's exposed part is one the step verdict names (a quarter of the step or more)
        sides["accumulate"] = (accumulate, lambda s: s.facts["shares"].get("communication", 0.0) >= MIXED_PART_SHARE)
    # the same global batch both ways: rank 1 with SLOW_FACTOR x the batch, then every rank with the average
    even = _write(models, "even_batch.py", WORKLOAD_POINT.format(path=str(model), b=samples * (1 + SLOW_FACTOR) // 2))

    def ranks(folder: Path, fixed: bool) -> Sample:
        target = ddp_runs / folder.parent.name / folder.name
        flags = (
            ["--workload", even]
            if fixed
            else ["--slow-rank", "1", "--slow-factor", str(SLOW_FACTOR), *(["--workload", model] if workload else [])]
        )
        return ddp_side(target, flags, samples=samples * (1 + SLOW_FACTOR))

    sides["rebalance"] = (ranks, lambda s: s.facts.get("slow_rank") is not None)
    if workload:
        skipped["tiles"] = (
            "it measures 02's own Add kernel, not a model: run nox -s fix -- 0 --pairs tiles without --workload"
        )
    else:
        sides["tiles"] = (_kernel_pair(models.parent / "builds"), lambda s: s.facts["shares"]["scalar"] >= SCALAR_SHARE)
    return sides, {name: why for name, why in skipped.items() if name in chosen}


def _kernel_pair(builds: Path):
    """02's kernel on the twin, as the lesson sets it (TILE_NUM 8) and with the fix (TILE_NUM 2): each variant built
    once, in its own folder, the first time a run needs it."""

    def side(folder: Path, fixed: bool) -> Sample:
        tiling = {"TILE_NUM": TILES_FIXED if fixed else TILES_LESSON}
        binary = build_kernel_variant(builds / f"tile_num_{tiling['TILE_NUM']}", tiling)
        return kernel_side(folder, binary)

    return side


def _graph_pair(work, models: Path):
    """The graph pair's (side, fires) on ``work``'s export, or why it cannot run there."""
    try:
        onnx, inputs, fused = _export(work, models)
    except LabError as err:
        return f"the model could not be exported to ONNX: {err}"
    if not fused:
        return (
            f"ONNX Runtime's optimizer finds nothing to fuse in {onnx.name}: the graph runs as exported at every level"
        )

    def side(folder: Path, fixed: bool) -> Sample:
        return onnx_side(
            folder,
            onnx,
            inputs,
            ["--graph-optimization", "all"] if fixed else [],
            samples=work.samples or 1,
            workload=work.info(),
        )

    return side, lambda s: True  # fires: the optimizer changes the graph (found above, before any run)


def _export(work, models: Path) -> tuple[Path, Path, dict[str, int]]:
    """The workload's fp32 ONNX export (mode 03's, with its lesson), its inputs as the lesson feeds them, and what
    ONNX Runtime's optimizer would change in it: {op type: count removed (> 0) or added (< 0)}."""
    from collections import Counter

    import numpy as np
    import onnx
    import onnxruntime as ort

    from common.modes.pyacl.export import export
    from common.modes.pyacl.variants import ModelFiles

    files = ModelFiles(work)
    path = export(files)  # again each time: the file in 03's model folder may be another version's
    models.mkdir(parents=True, exist_ok=True)
    inputs = models / "onnx_inputs.npz"
    np.savez(inputs, *files.arrays)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.optimized_model_filepath = str(models / f"{path.stem}.ort_all.onnx")
    options.log_severity_level = 3
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    before = Counter(n.op_type for n in onnx.load(str(path), load_external_data=False).graph.node)
    after = Counter(n.op_type for n in onnx.load(options.optimized_model_filepath, load_external_data=False).graph.node)
    return path, inputs, {k: before[k] - after[k] for k in before | after if before[k] != after[k]}
