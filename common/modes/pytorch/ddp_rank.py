"""One rank of mode 04's DDP run: the lesson file unchanged, with what the driver reads from each rank.

torchrun starts, in every rank,
``python common/modes/pytorch/ddp_rank.py --status-dir DIR [--fault KIND:RANK --fault-step N] LESSON [ARGS...]``.
This program keeps ``DIR/rank_<r>.json`` (pid, state, step) up to date, dumps the rank's Python
stack into ``DIR/rank_<r>.stack`` when the driver sends SIGUSR1, runs the lesson as
``python LESSON ARGS`` would (runpy, as ``__main__``), and at the end records the digest of the
weights it trained. It watches the lesson from outside: the model is the one the lesson hands
to DistributedDataParallel, its local batch the first one DDP is called with, and a step ends
with each optimizer step. The failure drill (``--fault``) is injected here too, at the start of
step N: none of this is in the file a learner copies.
"""

from __future__ import annotations

import argparse
import faulthandler
import functools
import hashlib
import json
import os
import runpy
import signal
import sys
import time
from pathlib import Path

STATUS_DIR = "rank_status"  # per-rank progress files under the run's output folder (not profiling data)


class RankStatus:
    """``<status dir>/rank_<r>.json``: pid, state and step of one rank, for the driver to read."""

    def __init__(self, folder: Path, rank: int) -> None:
        self.path = folder / f"rank_{rank}.json"
        self.data: dict = {"rank": rank, "pid": os.getpid(), "state": "starting", "step": None}
        self.stacks = None  # the open rank_<r>.stack file, once start() registered it

    @classmethod
    def start(cls, folder: Path, rank: int) -> RankStatus:
        """Write the first status, and dump this rank's stack into ``rank_<r>.stack`` when the driver asks."""
        status = cls(folder, rank)
        status.update()
        status.stacks = (folder / f"rank_{rank}.stack").open("w")
        faulthandler.register(signal.SIGUSR1, file=status.stacks, all_threads=False)
        return status

    def update(self, **changes: object) -> None:
        self.data.update(changes, time=time.time())
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data))
        tmp.replace(self.path)

    # ``with RankStatus.start(folder, rank) as status:`` — an error inside is recorded for the driver
    # (state "failed", the message) and the rank exits non-zero: ``return status.exit_code``.
    exit_code = 0

    def __enter__(self):
        return self

    def __exit__(self, kind, err, tb) -> bool:
        if kind is None or not issubclass(kind, Exception):
            return False
        self.fail(f"{kind.__name__}: {err}")
        return True

    def fail(self, error: str, exit_code: int = 1) -> None:
        self.update(state="failed", error=error[:400])
        self.exit_code = exit_code


class Watch:
    """The running lesson seen from outside: the model DistributedDataParallel wraps, the rows of the first
    batch it is called with, and each optimizer step (which ends a training step)."""

    def __init__(self, status: RankStatus, rank: int, fault: str | None, fault_step: int) -> None:
        import torch
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self.status, self.rank, self.fault, self.fault_step = status, rank, fault, fault_step
        self.model, self.rows, self.step = None, None, 0
        ddp = torch.nn.parallel.DistributedDataParallel
        wrap = ddp.__init__

        @functools.wraps(wrap)
        def watched(module, inner, *args, **kwargs):
            wrap(module, inner, *args, **kwargs)
            self.model = inner
            module.register_forward_pre_hook(self._batch)
            status.update(state="running", step=0)

        ddp.__init__ = watched
        register_optimizer_step_post_hook(self._stepped)

    def _batch(self, module, args) -> None:
        if self.rows is None and args and hasattr(args[0], "shape"):
            self.rows = int(args[0].shape[0])

    def _stepped(self, optimizer, args, kwargs) -> None:
        self.step += 1
        self.status.update(step=self.step)
        if self.fault and self.step == self.fault_step and int(self.fault.split(":")[1]) == self.rank:
            inject_fault(self.fault, self.rank, self.step)


def inject_fault(fault: str, rank: int, step: int) -> None:
    """The failure drill: ``crash`` (an exception), ``kill`` (SIGKILL, as the OOM killer would) or ``hang``."""
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


def run_lesson(path: str, argv: list[str]) -> int:
    """The lesson as ``python LESSON ARGV`` runs it (its folder first on sys.path); its exit code."""
    sys.argv = [path, *argv]
    sys.path[0] = str(Path(path).resolve().parent)
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else 0 if stop.code is None else 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ddp_rank.py", description=__doc__.splitlines()[0])
    parser.add_argument("--status-dir", required=True, type=Path)
    parser.add_argument("--fault", help="crash:<rank>, kill:<rank> or hang:<rank> (validated by the driver)")
    parser.add_argument("--fault-step", type=int, default=0, help="the step the fault happens at")
    parser.add_argument("lesson")
    parser.add_argument("lesson_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    rank = int(os.environ["RANK"])
    with RankStatus.start(args.status_dir, rank) as status:
        watch = Watch(status, rank, args.fault, args.fault_step)
        code = run_lesson(args.lesson, args.lesson_args)
        if code:
            status.fail(f"the lesson exited with code {code} (its message is in torchrun.log)", code)
        elif watch.model is None:
            status.fail("the lesson ended without wrapping a model in DistributedDataParallel")
        else:
            status.update(state="done", params=params_digest(watch.model), local_batch=watch.rows)
    return status.exit_code


if __name__ == "__main__":
    sys.exit(main())
