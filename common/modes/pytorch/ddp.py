"""Mode 04 · DDP — beyond one device: profile every rank of a torch.distributed job.

``bash 04_pyTorch/run_ddp.sh [nproc] [device_list] [--slow-rank R] [--workload FILE] ...`` runs this
module: it starts the lesson ``04_pyTorch/src/ddp_with_profiler.py`` under torchrun on N ranks
(:mod:`common.modes.pytorch.ddp_torchrun`: validation, output folder, supervision, the diagnosis of a failed
or hung rank, the portable traces turned into torch_npu's per-rank layout), then reads every rank's
profile into the cluster view and checks the run: the same ops on every step and rank, the same
collectives, the weights identical on every rank and equal to one process's, the slow rank named
when one was given more work; with msprof-analyze's cluster view beside it, when installed.
"""

from __future__ import annotations

from collections import Counter

from common.analyze import checks, grouping
from common.analyze.slow_rank import collective_arrivals, find_slow_rank, rank_summaries
from common.formats.cluster import load_cluster
from common.formats.communication import rank_collectives
from common.formats.datasets import file_rows
from common.modes.pytorch import ddp_torchrun, lesson_file, mode_dir
from common.modes.pytorch.ddp_rank import params_digest
from common.workload import BATCH, flatten_output, make_input

MODE_DIR = mode_dir("04_pyTorch")
LESSON = lesson_file("04_pyTorch", "ddp_with_profiler.py")
# The lesson's schedule (skip 1, warm up 3, record 5) and optimizer: what the checks and the reference expect.
WAIT, WARMUP, ACTIVE = 1, 3, 5
STEPS = WAIT + WARMUP + ACTIVE
LEARNING_RATE = 0.01


def check_run(view, statuses: dict[int, dict], plan, work) -> list:
    """Per rank, every active step records the same ops as its first; every rank records the same ops per
    step (one model, one tool); the same collectives everywhere; the weights equal to one process's reference."""
    files = ["kernel_details", "op_statistic", "step_trace_time", "trace_view"]
    verdicts = [checks.check_files(file_rows([p.dataset for p in view.ranks], files), f"{plan.world} ranks")]
    firsts = {}
    for p in view.ranks:
        compute = [t for t in p.dataset.tasks if t.task_type != "COMMUNICATION"]
        records = grouping.records_by_step(compute)
        firsts[p.rank] = records[0] if records else None
        verdicts.append(
            checks.check_same_records(records, ACTIVE, f"rank {p.rank}, {ACTIVE} training steps", "training step")
        )
    ranks = sorted(firsts)
    verdicts.append(
        checks.check_same_records(
            [firsts[r] or Counter() for r in ranks],
            len(ranks),
            f"{len(ranks)} ranks, the first active step of each",
            "rank",
        )
    )
    how = (
        "one process on the global batch"
        if work.path is None
        else "one process averaging the ranks' gradients over their shards"
    )
    return verdicts + [
        checks.check_collectives(rank_collectives(view.ranks)),
        checks.check_params(statuses, reference_norms(plan, work), how),
    ]


def local_batch(work, rank: int, world: int, slow_rank: int | None, slow_factor: int) -> tuple:
    """Rank ``rank``'s shard of the batch, as the lesson takes it: its rows of the first dimension (TinyMLP:
    32 of a 32 x world batch), repeated ``slow_factor`` times on the slow rank."""
    import torch

    batch = (make_input(BATCH * world),) if work.path is None else work.inputs()
    repeat = slow_factor if rank == slow_rank else 1
    return tuple(torch.tensor_split(t, world)[rank].repeat(repeat, *[1] * (t.dim() - 1)) for t in batch)


def step_loss(model, x: tuple, work, scale: float = 1.0):
    """The workload's loss(output, input) (the input as make_input() shapes it), else the mean square of the
    outputs (every tensor of a tuple, dict or dataclass output, summed) — the lesson's loss."""
    out = model(*x)
    loss = (
        work.loss(out, x if len(x) > 1 else x[0])
        if work.loss
        else sum(t.float().square().mean() for t in flatten_output(out))
    )
    return loss * scale if scale != 1.0 else loss


def reference_norms(plan, work) -> list[float]:
    """Parameter norms after the same steps in one process. TinyMLP: on the whole global batch (nproc x 32
    rows). A workload file: every rank's shard in turn, each loss scaled by 1/nproc, gradients summed — the
    average DDP's all-reduce computes, whatever the loss or BatchNorm do with a batch."""
    import torch

    model = work.build_model().train()
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    shards = (
        [(make_input(BATCH * plan.world),)]
        if work.path is None
        else [local_batch(work, r, plan.world, plan.slow_rank, plan.slow_factor) for r in range(plan.world)]
    )
    scale = 1.0 if work.path is None else 1.0 / plan.world
    for _ in range(STEPS):
        optimizer.zero_grad(set_to_none=True)
        for x in shards:
            step_loss(model, x, work, scale).backward()
        optimizer.step()
    return params_digest(model)["norms"]


def interpret(view, plan) -> list:
    """With ``--slow-rank`` the view must blame that rank for its compute: the others wait for it in the all-reduce."""
    if plan.slow_rank is None:
        return []
    slow = find_slow_rank(rank_summaries(view))
    return [checks.check_slow_rank(slow, collective_arrivals(view), plan.slow_rank, plan.slow_factor)]


def main(argv: list[str] | None = None) -> int:
    lesson = ddp_torchrun.ddp_lesson(__doc__, "04_pyTorch/run_ddp.sh", MODE_DIR)
    args = lesson.parse(argv)
    run = ddp_torchrun.launch(lesson, args, LESSON, forwards=ACTIVE, schedule=(WAIT, WARMUP, ACTIVE))
    if not run.completed:
        return 1
    view = load_cluster(run.out)  # every rank's step table; refuses ranks that do not belong together
    verdicts = check_run(view, run.statuses, run.plan, run.workload) + interpret(view, run.plan)
    return run.report(view, verdicts, cross_check=args.cross_check)  # + msprof-analyze's, with --cross-check


if __name__ == "__main__":
    from common.modes.lesson import main_of

    main_of(main)
