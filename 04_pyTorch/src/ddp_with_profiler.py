"""Mode 04 on several ranks: profile every rank of a DistributedDataParallel training job.

    torchrun --nproc-per-node 2 ddp_with_profiler.py --model my_model.py --out prof_out_ddp

What you will do: torchrun starts this file once per rank. Each rank selects its device, joins
the process group (HCCL between NPUs, gloo between CPU processes), trains the model under
DistributedDataParallel on its share of the batch for 9 steps under the profiler's schedule,
and writes its own profile into ``--out``: torch_npu.profiler's ``*_ascend_pt/`` on an NPU,
torch.profiler's ``<host>_rank<r>.<ns>.pt.trace.json`` elsewhere.

What you will learn:
- what a data-parallel step is made of: compute, the gradient all-reduce DDP starts during
  backward (partly hidden behind it), and the host's own time;
- which rank is slow: give one more work (``--slow-rank 1 --slow-factor 4``) and the others
  wait for it in the all-reduce, so *their* communication time grows, not its own;
- what to do when the all-reduce holds the step: accumulate gradients over several micro-batches
  under ``ddp.no_sync()`` and all-reduce once per step (``ACCUMULATE`` / ``--accumulate``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.util
import os
import re
import socket
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.utils._pytree import tree_leaves  # how torch.export and transformers flatten outputs

# The schedule: skip 1 step, warm up 3 (recorded, thrown away: caches settle), record 5: those reach the files.
WAIT, WARMUP, ACTIVE = 1, 3, 5
STEPS = WAIT + WARMUP + ACTIVE
# The fix for "Communication(Not Overlapped) holds much of the step": gradient accumulation. Each step runs
# ACCUMULATE micro-batches, the first ACCUMULATE-1 under ddp.no_sync() (no all-reduce), the last one with it:
# one all-reduce per ACCUMULATE x the samples. 1: an all-reduce every micro-batch, as plain DDP.
ACCUMULATE = 1


# --- 1. the rank: its device, the process group, the profiler ---------------------------------------
def join(devices: list[int] | None, local_rank: int, timeout_s: float) -> torch.device:
    """Select this rank's device, then join the process group: HCCL between NPUs, gloo between CPU processes."""
    timeout = dt.timedelta(seconds=timeout_s)  # how long a collective waits for its slowest peer
    if devices is None:
        dist.init_process_group("gloo", timeout=timeout)
        return torch.device("cpu")
    import torch_npu  # noqa: F401  (registers the "npu" device and HCCL)

    # the rank selects its own device before HCCL starts (not ASCEND_RT_VISIBLE_DEVICES: unsupported while profiling)
    torch.npu.set_device(devices[local_rank])
    dist.init_process_group("hccl", timeout=timeout)
    return torch.device(f"npu:{devices[local_rank]}")


def profiler(out: Path, rank: int, npu: bool):
    """Mode 04's profiler and schedule, in every rank; each rank writes its own files into ``out``."""
    if npu:  # Level1 also writes communication.json and profiler_info_<rank>.json: what cluster tools read
        import torch_npu

        tp = torch_npu.profiler
        config = tp._ExperimentalConfig(
            profiler_level=tp.ProfilerLevel.Level1,
            aic_metrics=tp.AiCMetrics.PipeUtilization,  # pipe busy ratios per kernel
            data_simplification=False,
        )  # keep msprof's own CSVs (PROF_*) too
        return tp.profile(
            activities=[tp.ProfilerActivity.CPU, tp.ProfilerActivity.NPU],
            schedule=tp.schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
            on_trace_ready=tp.tensorboard_trace_handler(str(out)),
            record_shapes=True,
            profile_memory=True,
            with_stack=False,
            experimental_config=config,
        )
    tp = torch.profiler  # no NPU: the CPU is the only device; the rank's name goes into its file name
    return tp.profile(
        activities=[tp.ProfilerActivity.CPU],
        schedule=tp.schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
        on_trace_ready=tp.tensorboard_trace_handler(str(out), f"{socket.gethostname()}_rank{rank}"),
        record_shapes=True,
        profile_memory=True,
    )


# --- 2. the model: yours with --model FILE, else TinyMLP (this block is the same in every lesson) -------------------
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


def mean_square(out, _input) -> torch.Tensor:
    """The loss of a model without loss(): the mean square of its outputs, summed."""
    return sum(t.float().square().mean() for t in tensors(out))


# --- 3. train: the prof.step() loop --------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rank, world, local_rank = (int(os.environ[k]) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
    device = join(args.devices, local_rank, args.timeout)
    model, batch, loss = load_model(args.model, rows=32 * world)  # TinyMLP: 32 rows per rank
    loss = loss or mean_square
    model = model.train().to(device)  # training: dropout on, BatchNorm on the batch's statistics
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if args.devices else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)  # plain SGD: every run takes the same steps
    repeat = args.slow_factor if rank == args.slow_rank else 1  # this rank's rows of the batch; the slow rank's K times
    x = tuple(torch.tensor_split(t, world)[rank].repeat(repeat, *[1] * (t.dim() - 1)).to(device) for t in batch)
    sync = torch.npu.synchronize if args.devices else (lambda: None)
    with profiler(Path(args.out), rank, args.devices is not None) as prof:
        for _ in range(STEPS):
            optimizer.zero_grad(set_to_none=True)
            for micro in range(args.accumulate):  # <- your data loader's next micro-batch here; this one repeats
                with ddp.no_sync() if micro < args.accumulate - 1 else contextlib.nullcontext():
                    # DDP all-reduces each gradient bucket in the last micro-batch's backward only
                    loss(ddp(*x), x if len(x) > 1 else x[0]).backward()
            optimizer.step()
            sync()  # the device runs behind the host: the step ends when its work has
            prof.step()  # the schedule advances: skip, warm up, record
    dist.destroy_process_group()
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a file defining build_model() and make_input() (default: TinyMLP)")
    parser.add_argument("--out", default="prof_out_ddp", help="where every rank writes its profile")
    parser.add_argument("--devices", help="NPU ids, one per rank here, e.g. 0,1 (default 0..N-1); cpu: no NPU")
    parser.add_argument("--slow-rank", type=int, help="give this rank more work: the slow-rank demo")
    parser.add_argument(
        "--slow-factor",
        type=int,
        default=4,
        choices=range(1, 65),
        metavar="K",
        help="the slow rank's batch is K times larger (default 4)",
    )
    parser.add_argument(
        "--accumulate",
        type=int,
        default=ACCUMULATE,
        choices=range(1, 65),
        metavar="K",
        help=f"micro-batches per step, one all-reduce per step (default {ACCUMULATE})",
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds a collective waits for a peer")
    args = parser.parse_args(argv)
    if args.model is not None and not (Path(args.model).is_file() and os.access(args.model, os.R_OK)):
        parser.error(f"--model {args.model}: no such readable file")
    if args.devices == "cpu" or (args.devices is None and importlib.util.find_spec("torch_npu") is None):
        args.devices = None  # no NPU: CPU processes, gloo
    elif not re.fullmatch(r"\d+(,\d+)*", args.devices or "0"):
        parser.error(f"--devices {args.devices!r}: give NPU ids such as 0,1, or cpu")
    else:  # sorted: the rank with LOCAL_RANK r takes the r-th smallest id
        args.devices = (
            sorted(map(int, args.devices.split(",")))
            if args.devices
            else list(range(int(os.environ.get("LOCAL_WORLD_SIZE", 1))))
        )
    return args


if __name__ == "__main__":
    sys.exit(main())
