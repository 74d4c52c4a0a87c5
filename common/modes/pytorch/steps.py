"""The loop a profiled lesson runs: timed steps, the inference and training steps, what profiling costs.

Harness for mode 04 (and the sweep): the lesson file keeps the profiler and its schedule, this module
the plumbing around them, so a learner copies the lesson and not the timing code.
"""

from __future__ import annotations

import statistics
import time
from typing import NamedTuple

LEARNING_RATE = 0.01  # plain SGD at a fixed rate: every run takes the same steps


class Steps(NamedTuple):
    """What :func:`run_steps` measured: host wall time per step (µs), with and without the profiler's
    step switch, and what each step returned."""

    step_us: list[float]  # the whole step, prof.step() included: what a training loop sees
    work_us: list[float]  # the step's own work (and the device sync), without prof.step()
    results: list


def run_steps(step, count: int, on_step=None, sync=lambda: None) -> Steps:
    """``count`` calls of ``step``, each timed with and without ``on_step``.

    Both are kept because the profiler's step switch is not the same every step: the one that
    closes the active window stops the collection and hands the trace over, which makes that step
    alone 1.5-1.9x longer on the portable backend, without anything disturbing the machine.
    """
    step_us, work_us, results = [], [], []
    for _ in range(count):
        start = time.perf_counter()
        results.append(step())
        sync()  # the device runs behind the host: wait for it, or the step time is launch time only
        worked = time.perf_counter()
        if on_step:
            on_step()  # tell the profiler a step ended: the schedule advances here
        step_us.append((time.perf_counter() - start) * 1e6)
        work_us.append((worked - start) * 1e6)
    return Steps(step_us, work_us, results)


def forward_step(model, args: tuple):
    """One inference forward, ``model(*args)``, with no autograd graph (as a deployed model runs)."""
    import torch

    def forward():
        with torch.no_grad():
            return model(*args)

    return forward


def make_step(work, device: str, train: bool):
    """A fresh model (same seed, same weights) and its step: a forward, or with ``train`` a training
    step — forward, the workload's loss, backward, an SGD step — with autograd recording."""
    import torch

    model, raw = work.build_model().to(device), work.inputs()
    args = tuple(t.to(device) for t in raw)
    if not train:
        return forward_step(model, args)
    model.train()  # BatchNorm uses the batch's statistics, dropout drops: what training runs
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    x = args if len(args) > 1 else args[0]  # loss(output, input) gets the input as make_input() shaped it

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        loss = work.loss(model(*args), x)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return train_step


def overhead_line(profiled_us: list[float], plain_us: list[float], active: int) -> str:
    """Profiling cost: median time of the last ``active`` steps with the profiler over the same steps without it."""
    with_prof = statistics.median(profiled_us[-active:])
    without = statistics.median(plain_us[-active:])
    return (
        f"profiling overhead: median step {with_prof:.1f} us with the profiler vs {without:.1f} us without "
        f"(ratio {with_prof / without:.2f}x, host wall clock over the {active} active steps)"
    )
