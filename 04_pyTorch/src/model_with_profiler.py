"""Mode 04 — profile your model's steps from inside PyTorch, with a schedule.

What you will do: run 9 steps of a model (TinyMLP, or yours with ``--model FILE``) inside ``torch_npu.profiler``
on an NPU (``torch.profiler`` elsewhere) with ``schedule(wait=1, warmup=3, active=5)``, calling ``prof.step()``
after every step. The profiler writes into ``--out DIR``: ``*_ascend_pt/`` on an NPU, ``*.pt.trace.json`` elsewhere.

What you will learn:
- why a schedule: the first steps pay one-off costs (allocator, caches), so only 5 are recorded;
- where ``prof.step()`` goes: once per step, after the step's work, and why the NPU is synchronized first;
- how to profile training too (``--train``): forward, loss, backward and the optimizer, step by step;
- how to make it faster: each fix below answers one finding of the report; change one, profile again, compare.

Run: ``python model_with_profiler.py --model my_model.py --out prof_out [--device npu:0|cpu] [--train]``; the model
file defines ``build_model()`` and ``make_input()`` (and ``loss(output, input)`` for --train).
"""

import argparse
import importlib.util
import os
import re
import sys
from pathlib import Path

import numpy as np
import torch
from torch.utils._pytree import tree_leaves  # how torch.export and transformers flatten outputs

WAIT, WARMUP, ACTIVE = 1, 3, 5  # skip 1 step, warm up 3 (recorded, thrown away), record 5
STEPS = WAIT + WARMUP + ACTIVE
LEARNING_RATE = 0.01

# --- the fixes: each answers one finding; change one at a time, profile again the same way, compare -------------
# host-bound (Free holds most of the step): more samples per step amortize the host's fixed cost per op.
BATCH = None  # e.g. 64 (--batch 64): the input's first dimension, its rows repeated; None: make_input()'s own
# compute-bound in fp32: a narrower type does more per cycle and moves half the bytes; it trades accuracy, so
# check the output against the fp32 run's (python -m common precision shows the cost op by op).
PRECISION = "fp32"  # "bf16" or "fp16" (--precision bf16): the model and its floating-point inputs in that type
# training, an optimizer step of one small update op per parameter: one fused op updates them all.
FUSED_OPTIMIZER = False  # True (--fused-optimizer): torch.optim.SGD(fused=True); torch_npu.optim.NpuFusedSGD on an NPU
# On an NPU only (torch_npu): "task-queue" (TASK_QUEUE_ENABLE=2) and "cpu-affinity" (CPU_AFFINITY_CONF=2) for a
# host-bound step; "binary-operators" when the host timeline shows operator compiles (AclopCompile) in the step;
# "hf32" for a compute-bound fp32 MatMul (it trades precision); "aoe" for a long op with no bound pipe (dumps the
# graph for `aoe --job_type=2`). What each does and its source: docs/make_it_faster.md, "NPU-only remedies".
NPU_TUNING = ()  # e.g. ("task-queue", "hf32") (--npu-tuning task-queue hf32)
TUNINGS = ("task-queue", "cpu-affinity", "binary-operators", "hf32", "aoe")


# --- 1. the profiler, with its schedule ---------------------------------------------------------------
def npu_profiler(out: str):
    """torch_npu.profiler: writes ``<out>/<host>_<pid>_<ts>_ascend_pt/`` when the 5 active steps end."""
    import torch_npu

    config = torch_npu.profiler._ExperimentalConfig(
        profiler_level=torch_npu.profiler.ProfilerLevel.Level1,  # Level1: PMU + op_statistic + api_statistic
        aic_metrics=torch_npu.profiler.AiCMetrics.PipeUtilization,  # pipe busy ratios in kernel_details
        data_simplification=False,
    )  # keep PROF_*/mindstudio_profiler_output too (msprof's own CSVs)
    return torch_npu.profiler.profile(
        activities=[torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU],
        schedule=torch_npu.profiler.schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(out),
        record_shapes=True,
        profile_memory=True,  # memory_record.csv, operator_memory.csv: peak memory and the ops that allocate
        with_stack=False,  # call stacks inflate host time in exactly the steps we measure
        experimental_config=config,
    )


def portable_profiler(out: str):
    """torch.profiler with the same schedule (the CPU is the only device it sees): ``<out>/*.pt.trace.json``."""
    return torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=torch.profiler.schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(out),
        record_shapes=True,
        profile_memory=True,
        with_stack=False,
    )


# --- 2. the loop: one prof.step() per step -------------------------------------------------------------
def profile(step, out: str, npu: bool) -> list:
    """STEPS calls of ``step`` under the profiler; what each step returned."""
    results = []
    with npu_profiler(out) if npu else portable_profiler(out) as prof:
        for _ in range(STEPS):
            results.append(step())
            if npu:
                torch.npu.synchronize()  # the NPU runs behind the host: let the step's kernels finish in it
            prof.step()  # the step ended: the schedule moves on (skip -> warm up -> record -> write)
    return results


# --- 3. the step: the fixes applied, the NPU's own settings, an inference or a training step -------------
def apply_fixes(model, inputs, batch, precision):
    """BATCH and PRECISION: the inputs' rows repeated to ``batch``; the model and its float inputs in ``precision``."""
    if batch:
        inputs = tuple(t.repeat(-(-batch // len(t)), *[1] * (t.dim() - 1))[:batch] for t in inputs)
    if precision != "fp32":
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
        model, inputs = model.to(dtype), tuple(t.to(dtype) if t.is_floating_point() else t for t in inputs)
    return model, inputs


def tune_npu(settings, out: str) -> None:
    """The NPU-only settings: the two variables before torch_npu is imported (it reads them as it starts)."""
    for name, variable in (("task-queue", "TASK_QUEUE_ENABLE"), ("cpu-affinity", "CPU_AFFINITY_CONF")):
        if name in settings:
            os.environ[variable] = "2"
    import torch_npu

    if "binary-operators" in settings:  # precompiled operators, no online compile; no private formats
        torch_npu.npu.set_compile_mode(jit_compile=False)
        torch.npu.config.allow_internal_format = False
    if "hf32" in settings:
        torch.npu.matmul.allow_hf32 = True
    if "aoe" in settings:  # the graphs to tune go here; then: aoe --job_type=2 --model_path=<out>/aoe_dump
        torch_npu.npu.set_aoe(str(Path(out) / "aoe_dump"))


def make_step(model, inputs, loss, train: bool, fused: bool = False, npu: bool = False):
    """One step: an inference forward, or a training step (forward, loss, backward, SGD step)."""
    if not train:
        return torch.no_grad()(lambda: model(*inputs))  # a forward without autograd, as deployed
    model.train()  # BatchNorm uses the batch's statistics, dropout drops: what training runs
    if fused and npu:
        import torch_npu

        optimizer = torch_npu.optim.NpuFusedSGD(model.parameters(), lr=LEARNING_RATE)
    else:  # plain SGD, fixed rate: runs repeat exactly; fused=None is torch's default (a loop over the parameters)
        optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, fused=True if fused else None)
    x = inputs if len(inputs) > 1 else inputs[0]  # loss() gets the input as make_input() shaped it

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        value = loss(model(*inputs), x)
        value.backward()
        optimizer.step()
        return value.detach()

    return train_step


# --- 4. the model: yours with --model FILE, else TinyMLP (this block is the same in every lesson) -------------------
class TinyMLP(torch.nn.Module):  # <- your model here, or pass --model FILE
    """4 x Linear(1024, 1024) with a GELU between each pair."""

    def __init__(self, hidden=1024):
        super().__init__()
        layers = [m for _ in range(3) for m in (torch.nn.Linear(hidden, hidden), torch.nn.GELU())]
        self.net = torch.nn.Sequential(*layers, torch.nn.Linear(hidden, hidden))

    def forward(self, x):
        return self.net(x)


def load_model(path, rows=32):
    """(model, inputs, loss) of a ``--model`` file: build_model() under seed 0, make_input() under seed 1 (a tuple
    or list: separate arguments), its loss(output, input) or None. ``path`` None: TinyMLP, ``rows`` x 1024 input."""
    module = None
    if path is not None:
        sys.path.append(str(Path(path).resolve().parent))  # the model file may import the files beside it
        spec = importlib.util.spec_from_file_location("user_model", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    torch.manual_seed(0)
    model = TinyMLP() if module is None else module.build_model()
    torch.manual_seed(1)
    x = torch.randn(rows, 1024) if module is None else module.make_input()
    inputs = tuple(x) if isinstance(x, (tuple, list)) else (x,)
    return model.eval(), inputs, getattr(module, "loss", None)


def tensors(output) -> list:
    """Every tensor of an output in torch's pytree order, then other objects' attributes (a dataclass, a KV cache)."""
    found = []  # tuples, lists, dicts, registered classes (ModelOutput) opened; an object: its attributes as set
    for t in tree_leaves(output):
        found += [t] if torch.is_tensor(t) else tensors([*vars(t).values()]) if hasattr(t, "__dict__") else []
    return found


# --- 5. run it ------------------------------------------------------------------------------------------
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a .py file with build_model() and make_input() (default: TinyMLP)")
    parser.add_argument("--out", required=True, help="the folder the profiler writes into")
    npu_here = importlib.util.find_spec("torch_npu") is not None  # default: the NPU where torch_npu is installed
    parser.add_argument("--device", default="npu:0" if npu_here else "cpu", help="npu:<logical id> or cpu")
    parser.add_argument("--train", action="store_true", help="profile training steps (needs loss() in --model)")
    parser.add_argument("--save-output", metavar="PATH", help=".npy: the last output (--train: the step losses)")
    parser.add_argument("--batch", type=int, default=BATCH, help="fix for host-bound: samples per step")
    parser.add_argument("--precision", default=PRECISION, choices=["fp32", "bf16", "fp16"], help="fix for fp32 compute")
    parser.add_argument("--fused-optimizer", action="store_true", default=FUSED_OPTIMIZER, help="fix for training")
    parser.add_argument("--npu-tuning", nargs="+", default=list(NPU_TUNING), choices=TUNINGS, help="NPU-only fixes")
    args = parser.parse_args(argv)
    if args.batch is not None and args.batch < 1:
        parser.error(f"--batch {args.batch}: give at least 1 sample per step")
    if args.model and not Path(args.model).is_file():
        parser.error(f"--model {args.model}: no such file")
    if not re.fullmatch(r"cpu|npu(:[0-9]{1,2})?", args.device):
        parser.error(f"--device {args.device!r} is not cpu, npu or npu:<logical device id>")
    model, inputs, loss = load_model(args.model)
    model, inputs = apply_fixes(model, inputs, args.batch, args.precision)
    if args.train and loss is None:
        parser.error("--train needs loss(output, input) in the --model file")
    npu = args.device.startswith("npu")
    if args.npu_tuning and not npu:
        parser.error("--npu-tuning: these settings exist on an NPU only (--device npu:<id>, torch_npu installed)")
    if npu:
        tune_npu(args.npu_tuning, args.out)
        import torch_npu  # noqa: F401  (registers the "npu" device with torch)

        torch.npu.set_device(args.device)  # the program selects its own device; the profiler records that one
    model, inputs = model.to(args.device), tuple(t.to(args.device) for t in inputs)
    results = profile(make_step(model, inputs, loss, args.train, args.fused_optimizer, npu), args.out, npu)
    if args.save_output:  # one output: .npy; several: one .npz beside the path
        saved = [torch.stack(results)] if args.train else tensors(results[-1])
        arrays = [t.detach().float().cpu().numpy() for t in saved]
        if len(arrays) == 1:
            np.save(args.save_output, arrays[0])
        else:
            np.savez(Path(args.save_output).with_suffix(".npz"), *arrays)
    print(f"profiled {STEPS} steps ({ACTIVE} recorded) into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
