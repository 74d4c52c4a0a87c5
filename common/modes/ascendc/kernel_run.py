"""What mode 02's two kernels share (the C++ ``add_kernel.cpp``, run by add_profile, and ``add_pyasc.py``, run by
pyasc_profile): the launch counts, running a program with its output shown, the launch-count check, the kernel's
answer (its pipe table and bottleneck class), and the report when msprof op's folder is all there is."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from common.analyze import checks
from common.analyze.bounds.kernel import classify_kernel
from common.analyze.bounds.op import device_peaks
from common.collect import launcher
from common.formats.records import Task
from common.modes.ascendc.build_kernel import read_build_info
from common.modes.ascendc.kernel_report import KERNEL, kernel_facts, kernel_table
from common.modes.report_files import write_report_files
from common.render.report import Report, Section
from common.render.text import render_text
from common.verdict import Verdict

WARMUP_LAUNCHES = 3  # first launches pay for page faults, thread start-up, instruction cache misses
MEASURED_LAUNCHES = 20


def run_binary(
    argv: list[str],
    child_env: dict[str, str] | None = None,
    timeout_s: float | None = None,
    stderr_log: Path | None = None,
) -> tuple[int, str]:
    """Run the host program; its output is shown as it is (verification lines included), its stderr also
    kept in ``stderr_log`` (prof_out/logs/, for after a failure)."""
    run = launcher.run_command(argv, child_env, timeout_s, capture=True, stderr_log=stderr_log)
    sys.stdout.write(run.output)
    if not run.ok:
        print(f"{Path(argv[0]).name} {run.describe}", file=sys.stderr)
    run.raise_if_stopped()  # Ctrl-C / SIGTERM: the program is stopped, the run ends here, marked incomplete
    return run.lab_exit_code, run.output


def check_launch_count(tasks: list[Task], where: str, kernel: str = KERNEL) -> Verdict:
    return checks.check_launch_count(tasks, where, kernel, WARMUP_LAUNCHES, MEASURED_LAUNCHES)


def kernel_answer(
    tasks: list[Task],
    sizes: dict[str, int],
    where: str,
    kernel: str,
    median_us: float,
    concurrent_blocks: int,
    backend_name: str,
) -> tuple[Verdict, str]:
    """The kernel's one answer: its pipe table (the evidence) and its bottleneck class (common.analyze.bounds.kernel)
    as one text, kept in report.md and report.html as in the terminal, and the check that a class was decided."""
    text = kernel_table(tasks, backend_name, where, sizes, kernel=kernel)
    verdict = report_verdict(tasks, sizes, kernel, median_us, concurrent_blocks, backend_name)
    return verdict[0], "\n".join([text, *verdict[1]])


def report_verdict(
    tasks: list[Task], sizes: dict[str, int], kernel: str, median_us: float, concurrent_blocks: int, backend_name: str
) -> tuple[Verdict, list[str]]:
    """The kernel's bottleneck class (common.analyze.bounds.kernel), its lines, and the check that one was decided."""
    peaks = kernel_peaks(backend_name)
    verdict = classify_kernel(kernel_facts(tasks, sizes, kernel, median_us, concurrent_blocks), peaks)
    return checks.check_bottleneck_stated(verdict, median_us), verdict.lines()


def kernel_peaks(backend_name: str):
    """NPU: the SoC table's bandwidth (estimates); portable: this machine's calibrated copy bandwidth."""
    if backend_name == "npu":
        soc = os.environ.get("SOC_VERSION") or (read_build_info().get("soc_version") or "")
        return device_peaks(soc) if soc else None
    from common.collect.calibrate import calibrate

    return calibrate()


def report_msprof_op_only(run, verdicts: list[Verdict], body: str) -> int:
    """The report when msprof op's OPPROF_* folder is all there is: what it measured and the checks, printed
    and saved as report.md and report.html. The lab's directory report reads PROF_* / torch_npu exports, which
    msprof op does not write."""
    report = Report(
        f"msprof lab report: {run.out}",
        [Section("msprof op", lines=body.splitlines(), preformatted=True), Section("Checks", verdicts=verdicts)],
    )
    print(render_text(report))
    print(*write_report_files(run.out, report), sep="\n")
    failed = [v.name for v in verdicts if not v.ok]
    run.record(verdicts_passed=not failed, failed_checks=failed)
    return 1 if failed else 0
