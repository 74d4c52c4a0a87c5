"""Mode 04 · DDP — beyond one device: profile every rank of a torch.distributed job.

What you will do: train TinyMLP (or your workload: ``--workload FILE``; forward, its loss,
backward, optimizer step) under
DistributedDataParallel on N ranks launched by ``torchrun``, with mode 04's profiler running in
every rank (torch_npu.profiler + HCCL on an NPU; torch.profiler + gloo on the portable
backend), then read the per-rank step tables side by side: the cluster view.

What you will learn:
- what a rank's step is made of in data-parallel training: Computing, Communication (the
  gradient all-reduce), how much of it is hidden behind compute, and Free;
- which rank is slow and why: a rank with more work makes every other rank wait in the
  collective, so *their* communication time grows, not its own;
- what a failed rank looks like: the run stops, names the rank and leaves nothing running.

Usage: ``bash 04_pyTorch/run_ddp.sh [nproc] [device_list] [--slow-rank R] [--workload FILE]``.
The same file is the per-rank program torchrun starts (``--worker``; not for direct use).
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from collections import Counter
from pathlib import Path

import torch
from model_with_profiler import ACTIVE, MODE_DIR, STEPS, WAIT, WARMUP, npu_profiler, portable_profiler

from common.analyze import checks, cluster
from common.collect import ranks
from common.workload import BATCH, flatten_output, load_workload, make_input

LEARNING_RATE = 0.01


# --- 1. profile: one rank, the program torchrun starts N times -------------------------------------
def worker(args) -> int:
    """One rank: join the process group, train under mode 04's profiler, write this rank's profile."""
    rank, world, local_rank = (int(os.environ[k]) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
    out = Path(args.worker_out)
    with ranks.RankStatus.start(out, rank) as status:  # pid / step / state for the driver; an error, if any
        # The rank selects its own device (the LOCAL_RANK-th of the sorted list), then HCCL (gloo on the CPU).
        device, npu = ranks.join_process_group(local_rank, args.timeout, args.rank_devices)
        work = load_workload(args.workload, check=False)  # the driver checked the file before it started us
        model = work.build_model().train().to(device)
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if npu else None)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=LEARNING_RATE)
        x = tuple(t.to(device) for t in local_batch(work, rank, world, args.slow_rank, args.slow_factor))
        sync = torch.npu.synchronize if npu else (lambda: None)
        status.update(state="running")
        # Mode 04's profiler and schedule (skip 1, warm up 3, record 5), in every rank. At Level1
        # torch_npu also writes communication.json and profiler_info_<rank>.json: what cluster tools read.
        with npu_profiler(out) if npu else portable_profiler() as prof:
            for step in range(STEPS):
                status.update(step=step)
                inject_fault(args.fault, rank, step)
                train_step(ddp, optimizer, x, work)
                sync()  # the device runs behind the host: the step ends when its work has
                prof.step()
        if not npu:
            ranks.write_portable_rank(prof, out, rank, (WAIT, WARMUP, ACTIVE), world_size=world,
                                      local_batch=int(x[0].shape[0]), launch_id=args.launch_id)
        status.update(state="done", params=params_digest(model), local_batch=int(x[0].shape[0]))
        torch.distributed.destroy_process_group()
    return status.exit_code


def local_batch(work, rank: int, world: int, slow_rank: int | None, slow_factor: int) -> tuple:
    """This rank's shard of the global batch (TinyMLP: 32 rows of a 32 x world batch; a workload file: its
    fixed input split along the first dimension); the slow rank repeats its shard (more work)."""
    if work.path is None:
        shards = (make_input(BATCH * world)[rank * BATCH : (rank + 1) * BATCH],)
    else:
        shards = tuple(torch.tensor_split(t, world)[rank] for t in work.inputs())
    if rank == slow_rank:
        shards = tuple(t.repeat(slow_factor, *[1] * (t.dim() - 1)) for t in shards)
    return shards


def train_step(model, optimizer, x: tuple, work, scale: float = 1.0) -> None:
    """One data-parallel training step; DDP all-reduces the gradient buckets during backward."""
    optimizer.zero_grad(set_to_none=True)
    step_loss(model, x, work, scale).backward()
    optimizer.step()


def step_loss(model, x: tuple, work, scale: float = 1.0):
    """The workload's loss(output, input) (the input as make_input() shapes it), else the mean square of the
    outputs (every tensor of a tuple, dict or dataclass output, summed)."""
    out = model(*x)
    loss = work.loss(out, x if len(x) > 1 else x[0]) if work.loss else sum(
        t.float().square().mean() for t in flatten_output(out))
    return loss * scale if scale != 1.0 else loss


def inject_fault(fault: str | None, rank: int, step: int) -> None:
    """The failure drill (``--fault crash:R`` / ``kill:R`` / ``hang:R``): rank R fails at the first active step."""
    if not fault or step != WAIT + WARMUP or int(fault.split(":")[1]) != rank:
        return
    if fault.startswith("crash"):
        raise RuntimeError(f"fault drill: rank {rank} crashed on purpose at step {step}")
    if fault.startswith("kill"):  # no Python error, no report: as the kernel's OOM killer would end it
        os.kill(os.getpid(), signal.SIGKILL)
    while True:  # hang: stop making progress; the peers block in the next all-reduce
        time.sleep(60)


def params_digest(model) -> dict:
    """sha256 of every parameter's bytes (identical on every rank after DDP) and their norms."""
    digest, norms = hashlib.sha256(), []
    for p in model.parameters():
        data = p.detach().float().cpu().contiguous()
        digest.update(data.numpy().tobytes())
        norms.append(float(data.double().norm()))
    return {"sha256": digest.hexdigest(), "norms": norms}


# --- 2. check ----------------------------------------------------------------------------------------
def check_run(view, statuses: dict[int, dict], plan, work) -> list:
    """Per rank, every active step records the same ops as its first; every rank records the same ops per
    step (one model, one tool); the same collectives everywhere; the weights equal to one process's reference."""
    files = ["kernel_details", "op_statistic", "step_trace_time", "trace_view"]
    verdicts = [checks.check_files([p.dataset for p in view.ranks], files, f"{plan.nproc} ranks")]
    firsts = {}
    for p in view.ranks:
        compute = [t for t in p.dataset.tasks if t.task_type != "COMMUNICATION"]
        records = checks.records_by_step(compute)
        firsts[p.rank] = records[0] if records else None
        verdicts.append(checks.check_same_records(records, ACTIVE, f"rank {p.rank}, {ACTIVE} training steps",
                                                  "training step"))
    ranks = sorted(firsts)
    verdicts.append(checks.check_same_records([firsts[r] or Counter() for r in ranks], len(ranks),
                                              f"{len(ranks)} ranks, the first active step of each", "rank"))
    how = ("one process on the global batch" if work.path is None else
           "one process averaging the ranks' gradients over their shards")
    return verdicts + [checks.check_collectives(view.ranks), checks.check_params(statuses, reference_norms(plan, work), how)]


def reference_norms(plan, work) -> list[float]:
    """Parameter norms after the same steps in one process. TinyMLP: on the whole global batch (nproc x 32
    rows). A workload file: every rank's shard in turn, each loss scaled by 1/nproc, gradients summed — the
    average DDP's all-reduce computes, whatever the loss or BatchNorm do with a batch."""
    model = work.build_model().train()
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    if work.path is None:
        x = (make_input(BATCH * plan.nproc),)
        for _ in range(STEPS):
            train_step(model, optimizer, x, work)
        return params_digest(model)["norms"]
    shards = [local_batch(work, r, plan.nproc, plan.slow_rank, plan.slow_factor) for r in range(plan.nproc)]
    for _ in range(STEPS):
        optimizer.zero_grad(set_to_none=True)
        for x in shards:
            step_loss(model, x, work, 1.0 / plan.nproc).backward()
        optimizer.step()
    return params_digest(model)["norms"]


# --- 3. read · 4. interpret --------------------------------------------------------------------------
def interpret(view, plan) -> list:
    """With ``--slow-rank`` the view must blame that rank for its compute: the others wait for it in the all-reduce."""
    if plan.slow_rank is None:
        return []
    slow = cluster.find_slow_rank(cluster.rank_summaries(view))
    return [checks.check_slow_rank(slow, cluster.collective_arrivals(view), plan.slow_rank, plan.slow_factor)]


def main(argv: list[str] | None = None) -> int:
    args = ranks.parse_args(argv, __doc__, "04_pyTorch/run_ddp.sh", MODE_DIR)
    if args.worker:
        return worker(args)
    run = ranks.launch(args, Path(__file__), MODE_DIR, forwards=ACTIVE, schedule=(WAIT, WARMUP, ACTIVE))
    if not run.completed:
        return 1
    view = cluster.load_cluster(run.out)  # every rank's step table; refuses ranks that do not belong together
    verdicts = check_run(view, run.statuses, run.plan, run.workload) + interpret(view, run.plan)
    return run.report(view, verdicts, cross_check=args.cross_check)  # + msprof-analyze's, when installed


if __name__ == "__main__":
    from common.lesson import main_of

    main_of(main)
