"""Every check the lab makes: the functions that return a :class:`~common.verdict.Verdict`, a module per subject.

A verdict names what was compared, prints the numbers and says whether it held; a failing verdict fails the run
that made it. A check with nothing to compare with (a lesson check whose expectation the workload does not
declare) is "not applicable": shown as [N/A], never a failure. Every check takes records (tasks, rows, the facts
an export's files hold, the workload's reference): it reads no file and runs no model.

    records.py    what each forward, step or launch recorded: the same ops every time, one kernel per launch
    outputs.py    the model's output against its reference; training losses with and without the profiler
    integrity.py  an export's files present, parsing, and agreeing with each other
    timing.py     shares of time: the top family, Σ op time against Computing, 01 against 04, a regression
    ranks.py      DDP: the same collectives on every rank, the weights, the slow rank named
    kernel.py     mode 02's kernel: verified, every launch recorded, pipe ratios, the bound pipe and class
    variants.py   mode 03's precision variants: outputs by a scale-relative tolerance, ops against the graph, Casts

Callers use ``checks.<name>``; the names below are the package's.
"""

from common.analyze.checks.integrity import check_files, compare_step_tables, integrity_verdicts
from common.analyze.checks.outputs import (
    check_output,
    check_output_file,
    check_program_verified,
    check_training_losses,
    output_tolerance,
)
from common.analyze.checks.kernel import (
    check_bottleneck_stated,
    check_build,
    check_bound,
    check_host_verified,
    check_launch_count,
    check_msprof_op,
    check_npu_verified,
    check_pyasc_verified,
    check_ratio_sums,
    check_simulator_cores,
    workload_not_profiled,
)
from common.analyze.checks.ranks import check_collectives, check_params, check_slow_rank
from common.analyze.checks.records import check_family_presence, check_kernel_per_launch, check_same_records
from common.analyze.checks.timing import (
    check_declared_top_family,
    check_regressions,
    check_share_agreement,
    check_sum_vs_computing,
    check_top_family,
    per_call_medians,
)
from common.analyze.checks.variants import (
    check_cast_lesson,
    check_graph_counts,
    check_graph_holds,
    check_measured_window,
    check_variant_files,
    check_variant_outputs,
)
from common.verdict import Verdict, not_applicable

__all__ = [
    "Verdict",
    "check_bottleneck_stated",
    "check_bound",
    "check_build",
    "check_cast_lesson",
    "check_collectives",
    "check_declared_top_family",
    "check_family_presence",
    "check_files",
    "check_graph_counts",
    "check_graph_holds",
    "check_host_verified",
    "check_kernel_per_launch",
    "check_launch_count",
    "check_measured_window",
    "check_msprof_op",
    "check_npu_verified",
    "check_output",
    "check_output_file",
    "check_params",
    "check_program_verified",
    "check_pyasc_verified",
    "check_ratio_sums",
    "check_regressions",
    "check_same_records",
    "check_share_agreement",
    "check_simulator_cores",
    "check_slow_rank",
    "check_sum_vs_computing",
    "check_top_family",
    "check_training_losses",
    "check_variant_files",
    "check_variant_outputs",
    "compare_step_tables",
    "integrity_verdicts",
    "not_applicable",
    "output_tolerance",
    "per_call_medians",
    "workload_not_profiled",
]
