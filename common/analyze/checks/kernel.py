"""Mode 02's checks on its kernel: every element verified by the program itself, every measured launch recorded,
the four pipe ratios adding up, the bound pipe and the bottleneck class stated, msprof op's PipeUtilization read.
The harness parses what the programs printed (their ``kernel sizes:`` and ``verified:`` lines) and hands it in."""

from __future__ import annotations

from common.analyze.bounds.kernel import PIPE_ROLE, PIPES, KernelVerdict
from common.analyze.bounds.op import busiest_pipe
from common.formats.records import Task
from common.verdict import Verdict, not_applicable

# Twin: the pipes run one after another on one thread and scalar is the remainder of the block's
# time, so the four ratios sum to 1 up to the 3-decimal rounding of the written cells
# (4 x 0.0005 = 0.002); 0.01 leaves room for that and nothing else.
RATIO_SUM_TOLERANCE_PORTABLE = 0.01
# NPU: the pipes are separate units that overlap (that is what the double buffer is for), so the
# sum exceeds 1 when they overlap and drops below 1 when the core waits. Below 0.5 most cycles are
# unaccounted (wrong metric set); above 2.5 more than two pipes are busy all the time, which a
# copy-add-copy kernel cannot do.
RATIO_SUM_RANGE_NPU = (0.5, 2.5)


def check_build(ok: bool, detail: str) -> Verdict:
    """The kernel's CMake project built (``detail``: the binary and its RUN_MODE, or where to look)."""
    return Verdict("build succeeds", ok, detail)


def workload_not_profiled(workload: str) -> Verdict:
    """Mode 02 profiles its own kernel, whatever workload the run was given: [N/A] for that workload."""
    return not_applicable(
        f"workload ({workload})", "not applicable: mode 02 profiles one AscendC kernel (fp16 Add), not the workload"
    )


def _verified_name(sizes: dict[str, int] | None) -> str:
    total = sizes["total_length"] if sizes else None
    return f"all {total} elements verified" if total else "all elements verified"


def _all_verified(returncode: int, sizes: dict[str, int] | None, verified: tuple[int, int] | None) -> bool:
    total = sizes["total_length"] if sizes else None
    return returncode == 0 and verified is not None and verified[0] == verified[1] == total


def check_host_verified(returncode: int, sizes: dict[str, int] | None, verified: tuple[int, int] | None) -> Verdict:
    """The C++ host program's own ``verified: N of M elements`` line (``verified``: N, M) covers every element of
    the ``kernel sizes:`` it printed (``sizes``; None when a line is missing)."""
    name = _verified_name(sizes)
    if _all_verified(returncode, sizes, verified):
        return Verdict(name, True, f"{verified[0]} of {verified[1]} equal fp16 2.0 (0x4000) in every launch")
    missing = [f"'{line}:'" for line, seen in (("verified", verified), ("kernel sizes", sizes)) if not seen]
    lines = f" without its {' and '.join(missing)} line{'s' if len(missing) > 1 else ''}" if missing else ""
    return Verdict(name, False, f"the program exited {returncode}{lines}; see the mismatches printed above")


def check_pyasc_verified(
    returncode: int, sizes: dict[str, int] | None, verified: tuple[int, int] | None, last_line: str, launches: int
) -> Verdict:
    """add_pyasc.py's own ``verified:`` line (``last_line``, parsed into ``verified``) covers every element of the
    sizes it printed, in every launch."""
    name = _verified_name(sizes)
    if _all_verified(returncode, sizes, verified):
        total = verified[1]
        return Verdict(
            name, True, f"{total} of {total} equal numpy's fp16 x + y bit for bit in each of {launches} launches"
        )
    found = f"; its last line: {last_line}" if verified else " without its 'verified:' line"
    return Verdict(name, False, f"add_pyasc.py exited {returncode}{found}; see the mismatches printed above")


def check_npu_verified(returncode: int, verified: tuple[int, int] | None) -> Verdict:
    """add_pyasc.py under msprof op (an NPU, or its simulator): its own ``verified: N of M`` line, N = M."""
    detail = (
        f"{verified[0]} of {verified[1]} equal numpy's fp16 x + y"
        if verified
        else f"the program exited {returncode} without its 'verified:' line"
    )
    return Verdict(
        "all elements verified", returncode == 0 and verified is not None and verified[0] == verified[1], detail
    )


def check_simulator_cores(returncode: int, cores: list[dict]) -> Verdict:
    """msprof op simulator wrote its per-core folders (``cores``: one dict per folder, ``trace`` true with a
    trace.json)."""
    traced = sum(c["trace"] for c in cores)
    return Verdict(
        "msprof op simulator wrote per-core data",
        returncode == 0 and bool(cores),
        f"{len(cores)} core folders under OPPROF_*/simulator, {traced} with trace.json",
    )


def check_launch_count(tasks: list[Task], where: str, kernel: str, warmup: int, measured: int) -> Verdict:
    """One recorded task of ``kernel`` per measured launch."""
    return Verdict(
        f"{measured} measured launches ({where})",
        len(tasks) == measured,
        f"{len(tasks)} {kernel} rows after {warmup} warm-up launches (want {measured})",
    )


def check_ratio_sums(tasks: list[Task], backend_name: str) -> Verdict:
    """Every launch's four ratios are in [0, 1] and sum to ~1 (twin) or lie in a plausible range (NPU)."""
    sums, out_of_range = [], 0
    for t in tasks:
        ratios = [t.pmu.get(f"aiv_{p}_ratio") for p in PIPES]
        if any(r is None for r in ratios):
            return Verdict("pipe ratios sum to ~1", False, f"a row lacks one of aiv_{{{','.join(PIPES)}}}_ratio")
        out_of_range += sum(1 for r in ratios if not 0.0 <= r <= 1.0)
        sums.append(sum(ratios))
    if not sums:
        return Verdict("pipe ratios sum to ~1", False, "no rows to check")
    lo, hi = min(sums), max(sums)
    if backend_name == "portable":
        ok = out_of_range == 0 and max(abs(s - 1.0) for s in sums) <= RATIO_SUM_TOLERANCE_PORTABLE
        rule = f"|sum - 1| <= {RATIO_SUM_TOLERANCE_PORTABLE} (twin: pipes serial, scalar = remainder)"
    else:
        ok = out_of_range == 0 and RATIO_SUM_RANGE_NPU[0] <= lo and hi <= RATIO_SUM_RANGE_NPU[1]
        rule = f"sum in [{RATIO_SUM_RANGE_NPU[0]}, {RATIO_SUM_RANGE_NPU[1]}] (NPU: pipes overlap)"
    return Verdict(
        "pipe ratios sum to ~1",
        ok,
        f"vec+scalar+mte2+mte3 per launch in [{lo:.3f}, {hi:.3f}] over "
        f"{len(sums)} launches, {out_of_range} ratios outside [0, 1]; rule {rule}",
    )


def check_bound(ratios: dict[str, float | None]) -> Verdict:
    """The busiest of the four pipes is named, with the others beside it."""
    found = busiest_pipe(ratios)
    if not found:
        return Verdict("bound pipe stated", False, "no aiv_*_ratio values to decide from")
    pipe, value = found
    others = ", ".join(f"{p} {ratios[p]:.3f}" for p in PIPES if p != pipe and ratios[p] is not None)
    return Verdict("bound pipe stated", True, f"{pipe} {value:.3f} ({PIPE_ROLE[pipe]}); {others}")


def check_bottleneck_stated(verdict: KernelVerdict, median_us: float) -> Verdict:
    """A bottleneck class was decided (common.analyze.bounds.kernel.classify_kernel's answer)."""
    decided = verdict.bottleneck is not None
    bound = f"{verdict.lower_bound_us:.3f} us" if verdict.lower_bound_us is not None else "N/A"
    return Verdict(
        "bottleneck class stated",
        decided,
        f"{verdict.bottleneck}; median {median_us:.1f} us, lower bound {bound}"
        if decided
        else "no rule holds: see the rules printed above",
    )


def check_msprof_op(code: int, pipes: dict[str, float | None] | None, region: str) -> Verdict:
    """msprof op exited 0 and its PipeUtilization.csv was read (``pipes``: its mean ratios), for either kernel."""
    found = ": " + ", ".join(f"{p} {v:.3f}" for p, v in pipes.items() if v is not None) if pipes else ""
    return Verdict(
        "msprof op wrote PipeUtilization",
        code == 0 and pipes is not None,
        "OPPROF_*/PipeUtilization.csv " + ("read" if pipes else "missing") + found + f"; {region}",
    )
