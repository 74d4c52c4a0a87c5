"""Mode 04 on several ranks: the driver that starts the DDP lesson under torchrun and watches its ranks.

The driver validates ``nproc`` / the device list / the drills before anything runs, starts the run as every mode
does (:meth:`common.modes.lesson.Lesson.start`: banner, devices, workload, the mode's lock, the output folder and
``run_info.json``), then starts
``python -m torch.distributed.run`` on loopback through :func:`launcher.run_command` (the one
supervisor of every program the lab starts: own session, timeout, SIGINT / SIGTERM passed on).
torchrun's program in every rank is :mod:`common.modes.pytorch.ddp_rank`, which runs the lesson file
unchanged and keeps ``rank_status/rank_<r>.json`` (pid, state, step) up to date and dumps the
rank's Python stack on SIGUSR1; that is how the driver names the rank at fault when the run does
not finish, and how it stops a rank that outlived torchrun (torchrun starts each rank in a
session of its own, so stopping torchrun's group does not reach them). On the portable backend
the driver then turns every rank's torch.profiler trace into torch_npu's per-rank layout.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from common.backend import Backend, parse_device_id, select_device
from common.collect import launcher
from common.errors import LabError
from common.formats.rundir import TIMEOUT_VAR, output_path, parse_timeout
from common.modes.lesson import Lesson, Run, require_module
from common.modes.pytorch import ddp_nodes
from common.modes.pytorch.ddp_rank import STATUS_DIR

MAX_NPROC = 8  # ranks per node on one Atlas 800 server (8 NPUs); the allow-list for nproc
MAX_NODES = 4  # torchrun agents started on this machine, each standing for one node
SLOW_FACTORS = range(2, 17)  # how many times the slow rank's local batch is repeated
DEFAULT_SLOW_FACTOR = 4
DEFAULT_TIMEOUT_S = 600
STOP_GRACE_S = 15.0  # after SIGTERM, how long torchrun gets to stop its ranks before SIGKILL
RANK_PROGRAM = Path(__file__).resolve().with_name("ddp_rank.py")  # torchrun's program: runs the lesson in a rank
TRACES_DIR = "torch_traces"  # portable backend: where the ranks' torch.profiler traces go, before conversion


# ===== The driver: validate ===================================================================


def ddp_lesson(doc: str | None, prog: str, mode_dir: Path) -> Lesson:
    """The driver's command line (``bash 04_pyTorch/run_ddp.sh ...``) on a mode's :class:`Lesson`: its
    ``--workload``, and DDP's own options (ranks and devices in place of one device)."""
    lesson = Lesson("ddp", mode_dir, doc, prog=prog, device=False, output=False, threads=False)
    parser = lesson.parser
    parser.add_argument("nproc", nargs="?", default="2", help=f"ranks on this node, 1..{MAX_NPROC} (default 2)")
    parser.add_argument(
        "devices",
        nargs="?",
        help="NPU ids, one per rank of every node, comma-separated (default "
        "0..nproc x nodes - 1; node i takes the i-th nproc of them)",
    )
    parser.add_argument(
        "--nodes",
        default="1",
        help=f"torchrun agents on this machine, 1..{MAX_NODES}, one per node "
        "(--nnodes N --node-rank i, c10d rendezvous on 127.0.0.1), each "
        "with nproc local ranks; their profiles gathered into one folder "
        "(default 1)",
    )
    parser.add_argument("--slow-rank", help="give this rank extra work (a larger local batch): the slow-rank demo")
    parser.add_argument(
        "--slow-factor",
        default=str(DEFAULT_SLOW_FACTOR),
        help=f"the slow rank's local batch is this many times larger, 2..16 (default {DEFAULT_SLOW_FACTOR})",
    )
    parser.add_argument(
        "--timeout",
        help=f"seconds before an unfinished run is ended (default ${TIMEOUT_VAR}, else {DEFAULT_TIMEOUT_S})",
    )
    parser.add_argument(
        "--fault", help="failure drill: crash:<rank>, kill:<rank> or hang:<rank> at the first active step"
    )
    parser.add_argument(
        "--output", help=f"output folder inside {mode_dir.name}/ (default {mode_dir.name}/prof_out_ddp)"
    )
    parser.add_argument(
        "--cross-check",
        action="store_true",
        help="install msprof-analyze if needed and check the cluster view against it",
    )
    return lesson


def parse_nproc(text: str) -> int:
    """nproc is an integer in 1..8."""
    if not re.fullmatch(r"[1-9]", str(text).strip()) or int(text) > MAX_NPROC:
        raise LabError(f"nproc {text!r} is not an integer in 1..{MAX_NPROC}", "e.g. bash 04_pyTorch/run_ddp.sh 2")
    return int(text)


def parse_nodes(text: str) -> int:
    """--nodes is an integer in 1..MAX_NODES."""
    if not re.fullmatch(r"[1-9]", str(text).strip()) or int(text) > MAX_NODES:
        raise LabError(
            f"--nodes {text!r} is not an integer in 1..{MAX_NODES}", "e.g. bash 04_pyTorch/run_ddp.sh 2 --nodes 2"
        )
    return int(text)


def parse_device_list(text: str | None, nproc: int) -> list[int]:
    """``0,1,...``: one distinct logical device id (0..63) per rank, sorted (rank r gets the r-th
    smallest); default 0..nproc-1."""
    if text is None:
        return list(range(nproc))
    ids = [parse_device_id(part) for part in str(text).split(",")]
    if len(set(ids)) != len(ids):
        raise LabError(f"device list {text!r} names a device twice", "give one distinct id per rank, e.g. 0,1")
    if len(ids) != nproc:
        raise LabError(f"device list {text!r} has {len(ids)} ids for {nproc} ranks", "give exactly one id per rank")
    return sorted(ids)


def parse_fault(text: str | None, nproc: int) -> str | None:
    if text is None:
        return None
    m = re.fullmatch(r"(crash|kill|hang):([0-9]{1,2})", text)
    if not m or int(m[2]) >= nproc:
        raise LabError(
            f"--fault {text!r} is not crash:<rank>, kill:<rank> or hang:<rank> with a rank below {nproc}",
            "e.g. --fault crash:1",
        )
    return text


@dataclass
class Plan:
    """A validated command line: what the driver will launch."""

    nproc: int  # ranks per node
    devices: list[int]  # every rank's, node by node
    slow_rank: int | None
    slow_factor: int
    timeout_s: float
    fault: str | None
    nodes: int = 1

    @property
    def world(self) -> int:
        """Ranks in all: nproc on each node."""
        return self.nproc * self.nodes

    def node_devices(self, node: int) -> list[int]:
        return self.devices[node * self.nproc : (node + 1) * self.nproc]


def validate(args) -> Plan:
    """Every option checked before anything runs (one ``Error:`` line for the first mistake)."""
    nproc = parse_nproc(args.nproc)
    nodes = parse_nodes(getattr(args, "nodes", "1"))
    world = nproc * nodes
    devices = parse_device_list(args.devices, world)
    slow_rank = None
    if args.slow_rank is not None:
        if not re.fullmatch(r"[0-9]{1,2}", args.slow_rank) or int(args.slow_rank) >= world:
            raise LabError(f"--slow-rank {args.slow_rank!r} is not a rank in 0..{world - 1}", "e.g. --slow-rank 1")
        slow_rank = int(args.slow_rank)
    if not re.fullmatch(r"[0-9]{1,2}", args.slow_factor) or int(args.slow_factor) not in SLOW_FACTORS:
        raise LabError(f"--slow-factor {args.slow_factor!r} is not an integer in 2..16", "e.g. --slow-factor 4")
    timeout_s = parse_timeout(args.timeout)  # --timeout, else $MSPROF_LAB_TIMEOUT_S
    if timeout_s is None:
        timeout_s = float(DEFAULT_TIMEOUT_S)  # never without a limit: a hung rank would block every other one
    if not 1 <= timeout_s <= 86400:
        raise LabError(f"--timeout {args.timeout!r} is not a number of seconds in 1..86400", "e.g. --timeout 600")
    fault = parse_fault(args.fault, world)
    return Plan(nproc, devices, slow_rank, int(args.slow_factor), timeout_s, fault, nodes)


# ===== The driver: launch torchrun ==============================================================


def free_port() -> int:
    """A free TCP port on the loopback interface for the rendezvous."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_argv(
    nproc: int, port: int, script: Path, script_args: list[str], nodes: int = 1, node: int = 0, run_id: str = "none"
) -> list[str]:
    """torchrun (``python -m torch.distributed.run``), rendezvous on loopback, starting ``script script_args`` in
    every rank: this node only, or (``nodes`` > 1) the agent of node ``node`` of a job of ``run_id``, node 0
    hosting the rendezvous store."""
    several = (
        ["--node-rank", str(node), "--rdzv-id", run_id, "--rdzv-conf", f"is_host={'true' if node == 0 else 'false'}"]
        if nodes > 1
        else []
    )
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        str(nodes),
        *several,
        "--nproc-per-node",
        str(nproc),
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"127.0.0.1:{port}",
        "--max-restarts",
        "0",  # a failed rank ends the run: this is a profile, not a job to keep alive
        "--monitor-interval",
        "0.5",
        str(Path(script).resolve()),
        *script_args,
    ]


def rank_env(backend: Backend, devices: list[int], root: Path) -> dict[str, str]:
    """The ranks' environment: loopback only, the repository on PYTHONPATH.

    On the NPU every rank selects its own device (``torch.npu.set_device``, from the lesson's
    ``--devices`` and LOCAL_RANK); ASCEND_RT_VISIBLE_DEVICES is refused, as CANN does not support it while profiling.
    """
    env = dict(os.environ)
    env.update(MASTER_ADDR="127.0.0.1", PYTHONPATH=os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")])))
    if backend.is_npu:
        for device in devices:
            select_device(backend, device)  # a logical id here; ASCEND_RT_VISIBLE_DEVICES set: refused
    else:
        env["GLOO_SOCKET_IFNAME"] = "lo"  # gloo's pairs on the loopback interface, never the network
    return env


# ===== The driver: watch the ranks, name the one at fault ======================================


def read_statuses(out: Path, nproc: int) -> dict[int, dict]:
    found = {}
    for rank in range(nproc):
        path = out / STATUS_DIR / f"rank_{rank}.json"
        try:
            found[rank] = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
    return found


def _ours(pid: int, out: Path) -> bool:
    """Is ``pid`` still one of this run's ranks (not a recycled pid): the rank program, with this run's status
    folder on its command line?"""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return str(RANK_PROGRAM).encode() in cmdline and str(out / STATUS_DIR).encode() in cmdline


def stop_leftovers(statuses: dict[int, dict], out: Path) -> list[int]:
    """SIGKILL any rank process that outlived torchrun; returns the ranks that needed it."""
    killed = []
    for rank, status in statuses.items():
        pid = int(status.get("pid") or 0)
        if pid and _ours(pid, out):
            os.kill(pid, signal.SIGKILL)
            killed.append(rank)
    deadline = time.monotonic() + 5
    while any(_ours(int(s.get("pid") or 0), out) for s in statuses.values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return killed


def dump_stacks(out: Path, statuses: dict[int, dict]) -> dict[int, str]:
    """Ask every live rank for its Python stack (faulthandler on SIGUSR1); returns the text per rank."""
    for status in statuses.values():
        pid = int(status.get("pid") or 0)
        if pid and _ours(pid, out):
            os.kill(pid, signal.SIGUSR1)
    time.sleep(1.0)
    return {
        r: (out / STATUS_DIR / f"rank_{r}.stack").read_text(errors="replace")
        for r in statuses
        if (out / STATUS_DIR / f"rank_{r}.stack").is_file()
    }


def in_collective(stack: str) -> bool:
    """Is a rank's stack inside DDP's backward / a torch.distributed call (waiting for its peers)?"""
    return bool(re.search(r"torch/autograd/|torch/distributed/|in backward", stack))


# torchrun's own failure summary names the first rank that failed ("Root Cause").
# A collective that failed because another rank left (gloo / HCCL / NCCL wording).
_PEER_LOST = re.compile(r"gloo|Connection (closed|reset)|peer|Socket Timeout|HCCL|NCCL|timed out", re.I)
_ROOT_CAUSE = re.compile(
    r"Root Cause \(first observed failure\):.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)", re.DOTALL
)


def _ranks(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def diagnose(
    nproc: int, statuses: dict[int, dict], stacks: dict[int, str], timed_out: bool, timeout_s: float, torchrun_log: str
) -> tuple[int | None, str]:
    """(the rank at fault or None, one sentence) for a run that did not finish."""
    if timed_out:
        stuck = [
            r
            for r in sorted(statuses)
            if statuses[r].get("state") != "done" and r in stacks and not in_collective(stacks[r])
        ]
        waiting = [r for r in sorted(statuses) if r not in stuck and statuses[r].get("state") != "done"]
        if len(stuck) == 1:
            r = stuck[0]
            return r, (
                f"timed out after {timeout_s:g} s: rank {r} stopped making progress at step "
                f"{statuses[r].get('step')} outside any collective"
                + (f"; {_ranks(waiting)} waited for it in the all-reduce" if waiting else "")
            )
        where = ", ".join(f"rank {r} at step {statuses[r].get('step')}" for r in sorted(statuses))
        return None, f"timed out after {timeout_s:g} s with no single rank to blame ({where or 'no rank started'})"
    root = _ROOT_CAUSE.search(torchrun_log)
    failed = sorted((s for s in statuses.values() if s.get("state") == "failed"), key=lambda s: s["time"])
    # A rank whose collective broke because a peer went away failed second, whatever the clock says:
    # blame the one rank that failed for a reason of its own, when there is exactly one.
    own = [s for s in failed if not _PEER_LOST.search(str(s.get("error", "")))]
    rank = own[0]["rank"] if len(own) == 1 else int(root[1]) if root else (failed[0]["rank"] if failed else None)
    if rank is None:
        missing = [r for r in range(nproc) if r not in statuses]
        if missing:
            return missing[0], f"rank {missing[0]} never started (no {STATUS_DIR}/rank_{missing[0]}.json)"
        return None, "torchrun failed before or after the ranks ran"
    status = statuses.get(rank, {})
    if status.get("state") == "failed":
        return rank, f"rank {rank} failed at step {status.get('step')}: {status.get('error')}"
    code = int(root[2]) if root else None
    how = (
        f"was killed by signal {signal.Signals(-code).name}"
        if code is not None and code < 0
        else f"exited with code {code}"
    )
    return rank, f"rank {rank} {how} at step {status.get('step')} without an error report (a hard crash or a kill)"


# ===== The driver, start to end ================================================================


@dataclass
class RanksRun:
    """A finished launch: the run Lesson.start began (output folder, run_info, workload), its plan, how each rank
    ended, and whether all of them did."""

    run: Run
    plan: Plan
    statuses: dict[int, dict]
    completed: bool

    @property
    def out(self) -> Path:
        return self.run.out

    @property
    def workload(self):
        """The common.workload.Workload the ranks trained."""
        return self.run.workload

    def report(self, view, verdicts: list, cross_check: bool = False) -> int:
        """The cluster view with the run's checks (and msprof-analyze's, with ``cross_check``); 0 when all held."""
        from common.analyze.cluster import cluster_report
        from common.collect.msprof_analyze import view_checks
        from common.render.cluster import cluster_view
        from common.render.html import report_page
        from common.render.text import render_text

        more, notes = view_checks(view, cross=cross_check)
        verdicts = verdicts + more
        report = cluster_view(cluster_report(view), verdicts, notes)
        text = render_text(report)
        print(text)
        (self.out / "cluster_report.txt").write_text(text + "\n")
        (self.out / "cluster_report.html").write_text(report_page(report))
        return 0 if all(v.ok for v in verdicts) else 1


def launch(lesson: Lesson, args, lesson_file: Path, *, forwards: int, schedule: tuple[int, int, int]) -> RanksRun:
    """Validate, start the run (:meth:`Lesson.start`: banner, devices, workload, lock, output folder, run_info),
    start ``plan.nproc`` ranks of ``lesson_file`` under torchrun (each through :mod:`ddp_rank`), supervise them
    and, on the portable backend, convert each rank's trace into torch_npu's layout.

    A run that does not finish is marked incomplete in run_info.json with the rank at fault and
    ends with one ``Error:`` line (``completed`` false); SIGINT / SIGTERM end the lab after that.
    """
    from common.workload import load_workload

    plan = validate(args)
    mode_dir = lesson.mode_dir

    def check(backend: Backend) -> dict:  # under the lock, before the output folder is touched
        work = load_workload(getattr(args, "workload", None))  # loaded by start already: the same object
        if work.path:  # a workload's fixed batch is split between the ranks along its first dimension
            rows = min(int(t.shape[0]) for t in work.inputs())
            if rows < plan.nproc:
                raise LabError(
                    f"{work.where}: make_input() has {rows} rows in its first dimension, fewer than {plan.nproc} ranks",
                    "give each rank at least one row: a larger batch, or fewer ranks",
                )
        if plan.nodes > 1 and plan.fault:
            raise LabError("--fault with --nodes: the failure drills run on one node", "drop one of the two")
        require_module(backend, "torch_npu", "pip install torch_npu matching your torch")
        return {"process_group": "hccl" if backend.is_npu else "gloo"}

    run = lesson.start(
        args=args,
        devices=plan.devices,
        out=output_path(mode_dir, args.output or str(mode_dir / "prof_out_ddp")),
        check=check,
        world_size=plan.world,
        nodes=plan.nodes,
        forwards=forwards,
        slow_rank=plan.slow_rank,
        slow_factor=plan.slow_factor if plan.slow_rank is not None else None,
        schedule=dict(zip(("wait", "warmup", "active"), schedule)),
    )
    backend, out, work = run.backend, run.out, run.workload
    (out / STATUS_DIR).mkdir()

    # One id per launch, in every rank's profiler_info: the cluster view refuses ranks of different launches.
    launch_id = uuid.uuid4().hex
    wait, warmup, _ = schedule
    # Where each node's ranks write: the output folder itself on one node; with several, a folder per node
    # (its own disk), gathered into the output folder afterwards as on a real cluster.
    node_dirs = [out] if plan.nodes == 1 else [out / f"node{i}" for i in range(plan.nodes)]
    traces = [d if backend.is_npu else d / TRACES_DIR for d in node_dirs]  # torch_npu writes *_ascend_pt/ itself
    rank_args = ["--status-dir", str(out / STATUS_DIR)]
    rank_args += ["--fault", plan.fault, "--fault-step", str(wait + warmup)] if plan.fault else []  # the first active
    env = rank_env(backend, plan.devices, mode_dir.parent)
    env["MSPROF_LAB_RUN_ID"] = run.info["run_id"]  # CANN's logs of every rank go to <out>/logs/ (Lesson.start)
    port, agents = free_port(), []
    for node, where in enumerate(traces):
        # The lesson's own command line, as a user would type it after torchrun. Its process group waits
        # longer than the driver, so a hang is diagnosed here (which rank, where) before gloo / HCCL give up.
        lesson_args = [
            "--out",
            str(where),
            "--devices",
            ",".join(map(str, plan.node_devices(node))) if backend.is_npu else "cpu",
            "--timeout",
            str(2 * plan.timeout_s + 60),
        ]
        if plan.slow_rank is not None:
            lesson_args += ["--slow-rank", str(plan.slow_rank), "--slow-factor", str(plan.slow_factor)]
        lesson_args += ["--model", work.path] if work.path else []
        agents.append(
            torchrun_argv(
                plan.nproc,
                port,
                RANK_PROGRAM,
                [*rank_args, str(Path(lesson_file).resolve()), *lesson_args],
                plan.nodes,
                node,
                launch_id,
            )
        )
    argv = agents[0]
    if plan.nodes > 1:  # one program starts every agent, so the launcher supervises (and stops) them as one group
        (out / "agents.json").write_text(json.dumps(agents, indent=1))
        argv = [sys.executable, "-m", "common.modes.pytorch.ddp_nodes", str(out / "agents.json")]
    print(
        f"launching {plan.world} ranks of {Path(lesson_file).name}"
        + (f" on {plan.nodes} torchrun agents (nodes)" if plan.nodes > 1 else "")
        + f": {' '.join(agents[0][1:7])} ... (rendezvous 127.0.0.1)",
        flush=True,
    )
    stacks: dict[int, str] = {}
    log = out / "torchrun.log"  # torchrun's stderr and the ranks' (warnings, tracebacks)
    app = launcher.run_command(
        argv,
        env,
        plan.timeout_s,
        grace_s=STOP_GRACE_S,
        stderr=log,
        on_timeout=lambda: stacks.update(dump_stacks(out, read_statuses(out, plan.nproc))),
    )
    # run_info's exit_code: -1 when stopped at the timeout, 128+N when the lab got signal N, else torchrun's
    code = -1 if app.timed_out else app.lab_exit_code if app.stopped_by else app.exit_code
    statuses = read_statuses(out, plan.world)
    killed = stop_leftovers(statuses, out)
    done = code == 0 and len(statuses) == plan.world and all(s.get("state") == "done" for s in statuses.values())
    if not done:
        if app.stopped_by:
            rank, why = None, f"stopped: the lab received {app.stopped_by}"
        else:
            rank, why = diagnose(
                plan.world, statuses, stacks, app.timed_out, plan.timeout_s, log.read_text(errors="replace")
            )
        failure = {"rank": rank, "reason": why, "killed_leftover_ranks": killed}
        run.finish(completed=False, exit_code=code, timed_out=app.timed_out, failure=failure)  # + where the logs are
        app.raise_if_stopped()  # Ctrl-C / SIGTERM: the ranks are stopped, the lab ends here
        print(
            f"Error: the DDP run did not complete — {why}; profile marked incomplete in {out} "
            f"(the ranks' output: {log})",
            file=sys.stderr,
        )
        return RanksRun(run, plan, statuses, False)
    try:
        if not backend.is_npu:
            ddp_nodes.convert_traces(traces, out, statuses, schedule, launch_id)
        elif plan.nodes > 1:
            ddp_nodes.gather_nodes(node_dirs, out)
    except LabError as err:
        run.finish(completed=False, exit_code=1, failure={"rank": None, "reason": str(err)})
        raise
    ranks = {r: {"local_batch": s["local_batch"], "params": s["params"]} for r, s in statuses.items()}
    run.finish(completed=True, exit_code=0, ranks=ranks)
    return RanksRun(run, plan, statuses, True)
