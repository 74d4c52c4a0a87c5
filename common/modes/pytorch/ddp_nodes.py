"""Every node's ranks gathered into one folder; several torchrun agents on this machine, as several nodes run them.

:func:`convert_traces` (portable backend) and :func:`gather_nodes` (NPU) put every rank's profile, from
whichever node's folder it was written in, into the one folder ``python -m common cluster`` reads, as the
multi-node recipe of 04_pyTorch/README.md says.

``python -m common.modes.pytorch.ddp_nodes AGENTS_JSON``, where AGENTS_JSON holds one argv list per node (each a
``torchrun --nnodes N --node-rank i ...`` of :func:`common.modes.pytorch.ddp_torchrun.torchrun_argv`). The DDP
driver runs this program under the lab's launcher, so the agents share its session: a timeout, Ctrl-C
or SIGTERM stops the whole group, every agent included. When one agent fails, the others are stopped
(SIGTERM: torchrun stops its ranks), as a job scheduler ends a job whose node failed, rather than left
waiting for a peer that will not come. Exits with the first non-zero exit code of an agent, else 0.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from common.errors import LabError

POLL_S = 0.2  # how often the agents are looked at


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    agents = json.loads(Path(args[0]).read_text())
    procs = [subprocess.Popen(agent) for agent in agents]  # argv lists, never a shell
    while True:
        codes = [p.poll() for p in procs]  # every agent, each time
        failed = next((c for c in codes if c not in (None, 0)), 0)
        if failed or None not in codes:
            break
        time.sleep(POLL_S)
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        p.wait()
    return failed


def convert_traces(
    traces: list[Path], out: Path, statuses: dict[int, dict], schedule: tuple[int, int, int], launch_id: str
) -> list[Path]:
    """Portable backend: each rank's torch.profiler trace (``<host>_rank<r>.<ns>.pt.trace.json``, as the lesson
    names it, in the trace folder of its node) -> that rank's ``*_ascend_pt/`` under ``out``, in torch_npu's
    multi-rank layout: every node's ranks gathered into one folder."""
    from common.collect.torch_npu_layout import portable_profiler_info
    from common.collect.torch_trace import write_ascend_pt_from_trace

    wait, warmup, active = schedule
    written = []
    for rank, status in sorted(statuses.items()):
        found = sorted(t for folder in traces for t in folder.glob(f"*_rank{rank}.*.pt.trace.json"))
        if len(found) != 1:
            raise LabError(
                f"{', '.join(map(str, traces))}: {len(found)} torch.profiler traces of rank {rank} "
                f"(*_rank{rank}.*.pt.trace.json), expected 1",
                "run again into a fresh output folder",
            )
        info = portable_profiler_info(wait, warmup, active)
        info.update(
            world_size=len(statuses), local_batch=status["local_batch"], launch_id=launch_id, process_group="gloo"
        )
        written.append(write_ascend_pt_from_trace(found[0], out, wait + warmup, info, rank=rank))
    return written


def gather_nodes(node_dirs: list[Path], out: Path) -> list[Path]:
    """NPU, several nodes: every node's ``*_ascend_pt/`` moved into ``out``, the one folder ``cluster`` reads."""
    import shutil

    moved = []
    for folder in node_dirs:
        for rank_dir in sorted(folder.glob("*_ascend_pt")):
            if (out / rank_dir.name).exists():
                raise LabError(
                    f"{rank_dir.name}: two nodes wrote a rank folder of that name",
                    "run again into a fresh output folder",
                )
            moved.append(Path(shutil.move(str(rank_dir), str(out / rank_dir.name))))
    return moved


if __name__ == "__main__":
    sys.exit(main())
