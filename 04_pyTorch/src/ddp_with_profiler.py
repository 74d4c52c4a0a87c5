"""Mode 04 · DDP — beyond one device: profile every rank of a torch.distributed job.

What you will do: train TinyMLP (forward, backward, optimizer step) under
DistributedDataParallel on N ranks launched by ``torchrun``, with the profiler running in
every rank (torch_npu.profiler + HCCL on an NPU; torch.profiler + gloo on the portable
backend), then read the per-rank step tables side by side: the cluster view.

What you will learn:
- what a rank's step is made of in data-parallel training: Computing, Communication (the
  gradient all-reduce), how much of it is hidden behind compute, and Free;
- which rank is slow and why: a rank with more work makes every other rank wait in the
  collective, so *their* communication time grows, not its own;
- what a failed rank looks like: the run stops, names the rank and leaves nothing running.

Usage: ``bash 04_pyTorch/run_ddp.sh [nproc] [device_list] [--slow-rank R]``.
The same file is the per-rank program torchrun starts (``--worker``; not for direct use).
"""

from __future__ import annotations

import datetime as dt
import faulthandler
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # before torch loads: keep the profiler's own logging quiet

from common.analyze.checks import Verdict  # noqa: E402
from common.backend import Backend, detect, parse_device_id  # noqa: E402
from common.errors import ArgumentParser, LabError, run_cli  # noqa: E402
from common.formats.rundir import (  # noqa: E402
    TIMEOUT_VAR,
    finish_run,
    lock_mode,
    output_path,
    parse_timeout,
    prepare_output_dir,
    start_run,
)

MODE_DIR = Path(__file__).resolve().parent.parent
# The schedule of mode 04: skip 1 step, warm up 3, record 5 (the first steps pay one-off costs:
# allocator, DDP's bucket set-up on the first backward, the process group's first connections).
WAIT, WARMUP, ACTIVE = 1, 3, 5
STEPS = WAIT + WARMUP + ACTIVE
LEARNING_RATE = 0.01
MAX_NPROC = 8  # ranks per node on one Atlas 800 server (8 NPUs); the allow-list for nproc
SLOW_FACTORS = range(2, 17)  # how many times the slow rank's local batch is repeated
DEFAULT_SLOW_FACTOR = 4
DEFAULT_TIMEOUT_S = 600
STOP_GRACE_S = 15.0  # after SIGTERM, how long torchrun gets to stop its ranks before SIGKILL
STATUS_DIR = "rank_status"  # per-rank progress files (not profiling data)
FILES = ["kernel_details", "op_statistic", "step_trace_time", "trace_view"]


# ===== Per rank: the program torchrun starts N times ========================================


class RankStatus:
    """``rank_status/rank_<r>.json``: pid, state and step of one rank, for the driver to read."""

    def __init__(self, folder: Path, rank: int) -> None:
        self.path = folder / f"rank_{rank}.json"
        self.data: dict = {"rank": rank, "pid": os.getpid(), "state": "starting", "step": None}

    def update(self, **changes: object) -> None:
        self.data.update(changes, time=time.time())
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data))
        tmp.replace(self.path)


def local_batch(rank: int, world: int, slow_rank: int | None, slow_factor: int):
    """This rank's shard of the global batch (``world`` x 32 rows of the shared input).

    The slow rank repeats its shard ``slow_factor`` times: more work, the same mean loss and so
    the same gradient, which keeps the result checkable against the single-process reference.
    """
    from common.workload import BATCH, make_input

    x = make_input(BATCH * world)[rank * BATCH : (rank + 1) * BATCH]
    return x.repeat(slow_factor, 1) if rank == slow_rank else x


def train_step(model, optimizer, x) -> None:
    """One data-parallel training step; DDP all-reduces the gradient buckets during backward."""
    optimizer.zero_grad(set_to_none=True)
    loss = model(x).square().mean()
    loss.backward()
    optimizer.step()


def params_digest(model) -> dict:
    """sha256 of every parameter's bytes (identical on every rank after DDP) and their norms."""
    digest = hashlib.sha256()
    norms = []
    for p in model.parameters():
        data = p.detach().float().cpu().contiguous()
        digest.update(data.numpy().tobytes())
        norms.append(float(data.double().norm()))
    return {"sha256": digest.hexdigest(), "norms": norms}


def inject_fault(fault: str | None, rank: int, step: int) -> None:
    """The failure drill (``--fault crash:R`` / ``kill:R`` / ``hang:R``): rank R fails at the first active step."""
    if not fault or step != WAIT + WARMUP:
        return
    kind, target = fault.split(":")
    if int(target) != rank:
        return
    if kind == "crash":
        raise RuntimeError(f"fault drill: rank {rank} crashed on purpose at step {step}")
    if kind == "kill":  # no Python error, no report: as the kernel's OOM killer would end it
        os.kill(os.getpid(), signal.SIGKILL)
    while True:  # hang: stop making progress; the peers block in the next all-reduce
        time.sleep(60)


def worker(args) -> int:
    """One rank: join the process group, train under the profiler, write this rank's profile."""
    rank, world, local_rank = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    out = Path(args.worker_out)
    status = RankStatus(out / STATUS_DIR, rank)
    status.update()
    stacks = (out / STATUS_DIR / f"rank_{rank}.stack").open("w")
    faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=False)  # the driver asks on a hang
    try:
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        from common.workload import build_model

        backend = detect()
        if backend.is_npu:
            import torch_npu  # noqa: F401  (registers the npu device and HCCL)

            torch.npu.set_device(local_rank)  # ASCEND_RT_VISIBLE_DEVICES maps rank -> card
            device, pg_backend = torch.device(f"npu:{local_rank}"), "hccl"
        else:
            device, pg_backend = torch.device("cpu"), "gloo"
        # Longer than the driver's timeout, so a hang is diagnosed by the driver (which rank, where)
        # before the process group gives up with a less specific error.
        dist.init_process_group(pg_backend, timeout=dt.timedelta(seconds=2 * args.timeout + 60))
        model = build_model().train().to(device)
        ddp = DistributedDataParallel(model, device_ids=[local_rank] if backend.is_npu else None)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=LEARNING_RATE)
        x = local_batch(rank, world, args.slow_rank, args.slow_factor).to(device)
        sync = torch.npu.synchronize if backend.is_npu else (lambda: None)
        status.update(state="running")

        def steps(on_step) -> None:
            for step in range(STEPS):
                status.update(step=step)
                inject_fault(args.fault, rank, step)
                train_step(ddp, optimizer, x)
                sync()
                on_step()

        if backend.is_npu:
            profile_npu(steps, out)
        else:
            profile_portable(steps, out, rank, world, x.shape[0], args.launch_id)
        status.update(state="done", params=params_digest(model), local_batch=int(x.shape[0]))
        dist.destroy_process_group()
        return 0
    except Exception as err:  # noqa: BLE001  (recorded for the driver, then the rank exits non-zero)
        status.update(state="failed", error=f"{type(err).__name__}: {err}"[:400])
        return 1


def profile_npu(steps, out: Path) -> None:
    """torch_npu.profiler per rank: it writes ``*_ascend_pt/profiler_info_{rank}.json`` itself."""
    import torch_npu

    config = torch_npu.profiler._ExperimentalConfig(
        profiler_level=torch_npu.profiler.ProfilerLevel.Level1,  # Level1: + communication.json / matrix
        aic_metrics=torch_npu.profiler.AiCMetrics.PipeUtilization,
        data_simplification=False,
    )
    with torch_npu.profiler.profile(
        activities=[torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU],
        schedule=torch_npu.profiler.schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(str(out)),
        record_shapes=True,
        with_stack=False,
        experimental_config=config,
    ) as prof:
        steps(prof.step)


def profile_portable(steps, out: Path, rank: int, world: int, batch: int, launch_id: str) -> None:
    """torch.profiler per rank, written in torch_npu's multi-rank layout by the shared writer."""
    import torch

    from common.collect.torch_npu_layout import portable_profiler_info, write_torch_profile

    schedule = torch.profiler.schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule, record_shapes=True
    ) as prof:
        steps(prof.step)
    info = portable_profiler_info(WAIT, WARMUP, ACTIVE)
    info.update(world_size=world, local_batch=batch, launch_id=launch_id, process_group="gloo")
    write_torch_profile(prof, out, WAIT + WARMUP, info, rank=rank)


# ===== The driver: validate, launch torchrun, watch it, then the cluster view ===============


def parse_nproc(text: str) -> int:
    """nproc is an integer in 1..8."""
    if not re.fullmatch(r"[1-9]", str(text).strip()) or int(text) > MAX_NPROC:
        raise LabError(f"nproc {text!r} is not an integer in 1..{MAX_NPROC}", "e.g. bash 04_pyTorch/run_ddp.sh 2")
    return int(text)


def parse_device_list(text: str | None, nproc: int) -> list[int]:
    """``0,1,...``: one distinct device id (0..63) per rank; default 0..nproc-1."""
    if text is None:
        return list(range(nproc))
    ids = [parse_device_id(part) for part in str(text).split(",")]
    if len(set(ids)) != len(ids):
        raise LabError(f"device list {text!r} names a device twice", "give one distinct id per rank, e.g. 0,1")
    if len(ids) != nproc:
        raise LabError(f"device list {text!r} has {len(ids)} ids for {nproc} ranks", "give exactly one id per rank")
    return ids


def parse_fault(text: str | None, nproc: int) -> str | None:
    if text is None:
        return None
    m = re.fullmatch(r"(crash|kill|hang):([0-9])", text)
    if not m or int(m[2]) >= nproc:
        raise LabError(
            f"--fault {text!r} is not crash:<rank>, kill:<rank> or hang:<rank> with a rank below {nproc}",
            "e.g. --fault crash:1",
        )
    return text


def free_port() -> int:
    """A free TCP port on the loopback interface for the rendezvous."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_argv(nproc: int, port: int, worker_args: list[str]) -> list[str]:
    """torchrun (``python -m torch.distributed.run``) on this node only, rendezvous on loopback."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "1",
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
        str(Path(__file__).resolve()),
        "--worker",
        *worker_args,
    ]


def rank_env(backend: Backend, devices: list[int]) -> dict[str, str]:
    """The ranks' environment: loopback only; on the NPU, the cards they may use."""
    env = dict(os.environ)
    env.update(
        MASTER_ADDR="127.0.0.1", PYTHONPATH=os.pathsep.join(filter(None, [str(MODE_DIR.parent), env.get("PYTHONPATH")]))
    )
    if backend.is_npu:
        # Rank r (LOCAL_RANK r) sees the r-th card of the list as npu:r. Set before torchrun so
        # every rank, and the profiler inside it, agrees on the mapping.
        env["ASCEND_RT_VISIBLE_DEVICES"] = ",".join(map(str, devices))
    else:
        env["GLOO_SOCKET_IFNAME"] = "lo"  # gloo's pairs on the loopback interface, never the network
    return env


def read_statuses(out: Path, nproc: int) -> dict[int, dict]:
    found = {}
    for rank in range(nproc):
        path = out / STATUS_DIR / f"rank_{rank}.json"
        try:
            found[rank] = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
    return found


def _ours(pid: int) -> bool:
    """Is ``pid`` still one of this run's ranks (not a recycled pid)?"""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return str(Path(__file__).resolve()).encode() in cmdline and b"--worker" in cmdline


def stop_leftovers(statuses: dict[int, dict]) -> list[int]:
    """SIGKILL any rank process that outlived torchrun; returns the ranks that needed it."""
    killed = []
    for rank, status in statuses.items():
        pid = int(status.get("pid") or 0)
        if pid and _ours(pid):
            os.kill(pid, signal.SIGKILL)
            killed.append(rank)
    deadline = time.monotonic() + 5
    while any(_ours(int(s.get("pid") or 0)) for s in statuses.values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return killed


def dump_stacks(out: Path, statuses: dict[int, dict]) -> dict[int, str]:
    """Ask every live rank for its Python stack (faulthandler on SIGUSR1); returns the text per rank."""
    for status in statuses.values():
        pid = int(status.get("pid") or 0)
        if pid and _ours(pid):
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
    rank = int(root[1]) if root else (failed[0]["rank"] if failed else None)
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


def launch(argv: list[str], env: dict[str, str], timeout_s: float, on_timeout, log: Path) -> tuple[int, bool]:
    """Run torchrun; on timeout call ``on_timeout`` (ranks still alive), SIGTERM torchrun (it stops its
    ranks), then SIGKILL. Its stderr and the ranks' (warnings, tracebacks) go to ``log``.
    Returns (exit code, timed out)."""
    with log.open("w") as err:  # Ctrl-C reaches us, not the ranks: they get their own session
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stderr=err, start_new_session=True)
    try:
        return proc.wait(timeout=timeout_s), False
    except subprocess.TimeoutExpired:
        on_timeout()
        return -1, True
    except KeyboardInterrupt:
        return 130, False
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="04_pyTorch/run_ddp.sh", description=__doc__.splitlines()[0])
    parser.add_argument("nproc", nargs="?", default="2", help=f"ranks on this node, 1..{MAX_NPROC} (default 2)")
    parser.add_argument("devices", nargs="?", help="NPU ids, one per rank, comma-separated (default 0..nproc-1)")
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
    parser.add_argument("--output", help="output folder inside 04_pyTorch/ (default 04_pyTorch/prof_out_ddp)")
    parser.add_argument(
        "--cross-check",
        action="store_true",
        help="install msprof-analyze if needed and check the cluster view against it",
    )
    parser.add_argument("--worker", action="store_true", help=argparse_hidden())
    parser.add_argument("--worker-out", help=argparse_hidden())
    parser.add_argument("--launch-id", help=argparse_hidden())
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.worker:
        args.slow_rank = None if args.slow_rank in (None, "") else int(args.slow_rank)
        args.slow_factor, args.timeout = int(args.slow_factor), float(args.timeout)
        return worker(args)

    # --- validate everything before anything runs ---------------------------------------------
    nproc = parse_nproc(args.nproc)
    devices = parse_device_list(args.devices, nproc)
    slow_rank = None
    if args.slow_rank is not None:
        if not re.fullmatch(r"[0-9]", args.slow_rank) or int(args.slow_rank) >= nproc:
            raise LabError(f"--slow-rank {args.slow_rank!r} is not a rank in 0..{nproc - 1}", "e.g. --slow-rank 1")
        slow_rank = int(args.slow_rank)
    if not re.fullmatch(r"[0-9]{1,2}", args.slow_factor) or int(args.slow_factor) not in SLOW_FACTORS:
        raise LabError(f"--slow-factor {args.slow_factor!r} is not an integer in 2..16", "e.g. --slow-factor 4")
    timeout_s = parse_timeout(args.timeout)  # --timeout, else $MSPROF_LAB_TIMEOUT_S
    if timeout_s is None:
        timeout_s = float(DEFAULT_TIMEOUT_S)  # never without a limit: a hung rank would block every other one
    if not 1 <= timeout_s <= 86400:
        raise LabError(f"--timeout {args.timeout!r} is not a number of seconds in 1..86400", "e.g. --timeout 600")
    fault = parse_fault(args.fault, nproc)

    # --- workload: the backend, the cards, the output folder ---------------------------------
    backend = detect()
    print(backend.banner(), flush=True)
    if backend.is_npu:
        hidden = [d for d in devices if d not in backend.devices]
        if hidden:
            raise LabError(
                f"device(s) {','.join(map(str, hidden))} not visible (visible: {','.join(map(str, backend.devices))})",
                "pick ids shown by `npu-smi info`",
            )
        if "torch_npu" not in backend.python_modules:
            raise LabError(
                "the npu backend needs torch_npu, which is not importable", "pip install torch_npu matching your torch"
            )
    out = output_path(MODE_DIR, args.output or str(MODE_DIR / "prof_out_ddp"))
    lock_mode(MODE_DIR)  # one run of this mode at a time: a second one stops here, before deleting anything
    out = prepare_output_dir(out)
    (out / STATUS_DIR).mkdir()
    info = start_run(
        out,
        mode="ddp",
        backend=backend.name,
        device=devices,
        command=sys.argv,
        world_size=nproc,
        process_group="hccl" if backend.is_npu else "gloo",
        forwards=ACTIVE,
        slow_rank=slow_rank,
        slow_factor=int(args.slow_factor) if slow_rank is not None else None,
        schedule={"wait": WAIT, "warmup": WARMUP, "active": ACTIVE},
    )

    # --- collect: torchrun starts the ranks; each profiles itself --------------------------------
    # One id per launch, in every rank's profiler_info: the cluster view refuses ranks of different launches.
    launch_id = uuid.uuid4().hex
    worker_args = [
        "--worker-out",
        str(out),
        "--launch-id",
        launch_id,
        "--slow-factor",
        args.slow_factor,
        "--timeout",
        str(timeout_s),
    ]
    worker_args += ["--slow-rank", str(slow_rank)] if slow_rank is not None else []
    worker_args += ["--fault", fault] if fault else []
    env = rank_env(backend, devices)
    env["MSPROF_LAB_RUN_ID"] = info["run_id"]
    argv = torchrun_argv(nproc, free_port(), worker_args)
    print(f"launching {nproc} ranks: {' '.join(argv[1:7])} ... (rendezvous 127.0.0.1)", flush=True)
    stacks: dict[int, str] = {}
    log = out / "torchrun.log"
    code, timed_out = launch(
        argv, env, timeout_s, lambda: stacks.update(dump_stacks(out, read_statuses(out, nproc))), log
    )
    statuses = read_statuses(out, nproc)
    killed = stop_leftovers(statuses)
    done = code == 0 and len(statuses) == nproc and all(s.get("state") == "done" for s in statuses.values())
    if not done:
        rank, why = diagnose(nproc, statuses, stacks, timed_out, timeout_s, log.read_text(errors="replace"))
        finish_run(
            out,
            info,
            exit_code=code,
            completed=False,
            timed_out=timed_out,
            failure={"rank": rank, "reason": why, "killed_leftover_ranks": killed},
        )
        print(
            f"Error: the DDP run did not complete — {why}; profile marked incomplete in {out} "
            f"(the ranks' output: {log})",
            file=sys.stderr,
        )
        return 1
    finish_run(
        out,
        info,
        exit_code=0,
        completed=True,
        ranks={r: {"local_batch": s["local_batch"], "params": s["params"]} for r, s in statuses.items()},
    )

    # --- parse, check, report: the cluster view ------------------------------------------------
    from common.analyze import checks
    from common.analyze import cluster

    view = cluster.load_cluster(out)
    verdicts = [checks.check_files([p.dataset for p in view.ranks], FILES, f"{nproc} ranks")]
    verdicts += [check_rank_counts(p) for p in view.ranks]
    verdicts += [check_collectives(view), check_params(statuses, reference_norms(nproc))]
    slow = cluster.find_slow_rank(cluster.rank_summaries(view))
    if slow_rank is not None:
        arrivals = cluster.collective_arrivals(view)
        last = max(arrivals.last, key=arrivals.last.get) if arrivals else None
        verdicts.append(
            Verdict(
                "the cluster view names the slow rank",
                slow.rank == slow_rank and slow.reason == "computing" and last == slow_rank,
                f"rank {slow_rank} was given {args.slow_factor}x its local batch; the view names rank {slow.rank} "
                f"(reason: {slow.reason}); the rank most often last at the collectives: {last}",
            )
        )
    more, notes = cluster.view_checks(view, install=args.cross_check)
    verdicts += more
    text = cluster.render_cluster(view, verdicts, notes)
    print(text)
    (out / "cluster_report.txt").write_text(text + "\n")
    return 0 if all(v.ok for v in verdicts) else 1


def training_op_counts() -> dict[str, int]:
    """Tasks per training step by family, from the model's modules.

    Forward: one MatMul per Linear, one GELU per GELU. Backward: per Linear one MatMul for its
    weight gradient and one for its input's gradient, except the first Linear (its input is
    data: no gradient); one GELU backward per GELU.
    """
    from common.workload import build_model, expected_op_counts

    forward = expected_op_counts(build_model())
    return {"matmul": 3 * forward["matmul"] - 1, "gelu": 2 * forward["gelu"]}


def check_rank_counts(profile) -> Verdict:
    from common.analyze import checks

    tasks = [t for t in profile.dataset.tasks if t.step_id is not None and t.task_type != "COMMUNICATION"]
    return checks.check_counts(tasks, ACTIVE, training_op_counts(), f"rank {profile.rank}, {ACTIVE} training steps")


def check_collectives(view) -> Verdict:
    """Every rank ran the same collectives in every step (communication.json, HCCL schema)."""
    per_rank = {}
    for p in view.ranks:
        path = p.folder / "ASCEND_PROFILER_OUTPUT" / "communication.json"
        if not path.is_file():
            return Verdict("same collectives on every rank", False, f"{path} missing")
        data = json.loads(path.read_text())
        per_rank[p.rank] = {step: sorted(ops.get("collective", {})) for step, ops in data.items()}
    first = per_rank[view.ranks[0].rank]
    counts = sorted({len(v) for v in first.values()})
    ok = bool(first) and all(v == first for v in per_rank.values()) and counts != [0]
    return Verdict(
        "same collectives on every rank",
        ok,
        f"{len(first)} steps x {'/'.join(map(str, counts))} all-reduce(s) per step in communication.json on rank "
        f"{view.ranks[0].rank}; {'identical' if ok else 'NOT identical'} on all {len(per_rank)} ranks",
    )


# fp32 on both sides; the sums run in a different order (per-rank shards, then the all-reduce),
# so the weights agree to rounding: ~1e-7 relative on norms of ~20.
PARAM_NORM_RTOL = 1e-5


def check_params(statuses: dict[int, dict], reference: list[float]) -> Verdict:
    """Every rank ends with bit-identical weights, equal (within rounding) to one process on the global batch."""
    digests = {s["params"]["sha256"] for s in statuses.values()}
    norms = statuses[0]["params"]["norms"]
    worst = max(abs(a - b) / abs(b) for a, b in zip(norms, reference))
    return Verdict(
        "weights identical on every rank and equal to the single-process reference",
        len(digests) == 1 and worst <= PARAM_NORM_RTOL,
        f"{len(digests)} distinct sha256 over {len(statuses)} ranks; parameter norms vs one process on the global "
        f"batch: largest relative difference {worst:.2e} (tolerance {PARAM_NORM_RTOL:g})",
    )


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


def reference_norms(nproc: int) -> list[float]:
    """Parameter norms after the same steps on one process with the whole global batch.

    DDP averages the ranks' gradients; with equal shards and a mean loss that is the gradient of
    the global batch, so one process on all ``nproc`` x 32 rows must end at the same weights.
    """
    import torch

    from common.workload import BATCH, build_model, make_input

    model = build_model().train()
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    x = make_input(BATCH * nproc)
    for _ in range(STEPS):
        train_step(model, optimizer, x)
    return params_digest(model)["norms"]


if __name__ == "__main__":
    run_cli(main)
