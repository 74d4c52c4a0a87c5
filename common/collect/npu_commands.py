"""argv builders for the real CANN toolchain. Nothing here runs a command or uses a shell.

Every value that reaches these builders has been validated (device ids, variant names);
paths are passed as single argv items, so spaces or shell characters in them are inert.
"""

from __future__ import annotations

from pathlib import Path

# The switches the lab turns on for a whole-program msprof collection.
MSPROF_SWITCHES = (
    "--ascendcl=on",  # AscendCL API calls -> api_statistic (acl level)
    "--runtime-api=on",  # runtime API calls (memcpy, launch, sync) -> api_statistic (runtime level)
    "--task-time=on",  # per-task device timing -> op_summary, op_statistic, task_time
    "--task-memory=on",  # per-op device memory
    "--ai-core=on",  # AI Core PMU counters ...
    "--aic-metrics=PipeUtilization",  # ... as pipe busy ratios (mac / vec / scalar / mte1-3)
    "--aicpu=on",  # ops that fall back to AI CPU
    "--msproftx=on",  # user markers, if the app sets any
)


def msprof_argv(msprof: str, output: Path, app_argv: list[str]) -> list[str]:
    """``msprof --output=<dir> <switches> <app argv...>``: msprof runs the app unchanged."""
    if not app_argv:
        raise ValueError("msprof needs an application to run")
    return [msprof, f"--output={output}", *MSPROF_SWITCHES, *app_argv]


def msprof_export_argv(msprof: str, prof_dir: Path) -> list[str]:
    """Re-export raw PROF_* data (e.g. after ``acl.prof`` collection) into mindstudio_profiler_output/."""
    return [msprof, "--export=on", f"--output={prof_dir}"]


ATC_FRAMEWORK_ONNX = "5"  # atc --framework: 0 Caffe, 1 MindSpore, 3 TensorFlow, 5 ONNX


def atc_argv(
    atc: str, model: Path, output: Path, soc_version: str, input_shape: str, options: tuple[str, ...] = ()
) -> list[str]:
    """``atc --model=<onnx> --framework=5 --output=<stem> --soc_version=<soc> --input_shape=<shape> <options>``.

    ``output`` is the path without ``.om`` (atc appends it); ``input_shape`` is e.g. ``x:32,1024``.
    """
    if not soc_version.startswith("Ascend"):
        raise ValueError(f"soc_version {soc_version!r} should look like Ascend910B3")
    return [
        atc,
        f"--model={model}",
        f"--framework={ATC_FRAMEWORK_ONNX}",
        f"--output={output}",
        f"--soc_version={soc_version}",
        f"--input_shape={input_shape}",
        *options,
    ]


def atc_om_to_json_argv(atc: str, om: Path, json_out: Path) -> list[str]:
    """``atc --mode=1 --om=<om> --json=<json>``: dump an offline model's graph as JSON."""
    return [atc, "--mode=1", f"--om={om}", f"--json={json_out}"]


# msprof op's metric sets (msopprof user guide, --aic-metrics). KernelScale is the one that honours a
# kernel's MetricsProfStart()/MetricsProfStop() region; without --aic-metrics the region is not
# collected. KernelScale exists on Atlas A2/A3 (Ascend910B*, Ascend910_93*) only.
MSPROF_OP_METRICS_REGION = ("KernelScale", "PipeUtilization")
MSPROF_OP_METRICS_PLAIN = ("PipeUtilization",)
MAX_LAUNCH_COUNT = 5000  # msprof op --launch-count accepts 1..5000


def msprof_op_metrics(soc_version: str | None) -> tuple[str, ...]:
    """``--aic-metrics`` for msprof op: KernelScale (the MetricsProf region) + PipeUtilization on A2/A3,
    PipeUtilization alone elsewhere (the region is then the whole kernel)."""
    if soc_version and (soc_version.startswith("Ascend910B") or soc_version.startswith("Ascend910_93")):
        return MSPROF_OP_METRICS_REGION
    return MSPROF_OP_METRICS_PLAIN


def msprof_op_argv(
    msprof: str, output: Path, app_argv: list[str], kernel_name: str | None = None, launch_count: int = 1,
    aic_metrics: tuple[str, ...] = MSPROF_OP_METRICS_REGION, launch_skip: int = 0,
) -> list[str]:
    """``msprof op --output=<dir> [--kernel-name=K] --aic-metrics=<sets> [--launch-skip-before-match=S]
    --launch-count=N <app argv...>``: per-block PMU of N launches of one kernel.

    ``launch_skip`` launches (the program's warm-up) are skipped before collection starts; the
    results land in ``<dir>/OPPROF_*/`` (OpBasicInfo.csv, PipeUtilization.csv, ...). ``msprof op``
    is CANN 8.x's entry point of the tool newer documentation calls ``msopprof``.
    """
    if not app_argv:
        raise ValueError("msprof op needs an application to run")
    if not 1 <= launch_count <= MAX_LAUNCH_COUNT:
        raise ValueError(f"launch_count must be in 1..{MAX_LAUNCH_COUNT}")
    if launch_skip < 0:
        raise ValueError("launch_skip must not be negative")
    if not aic_metrics:
        raise ValueError("msprof op needs at least one --aic-metrics set")
    argv = [msprof, "op", f"--output={output}"]
    if kernel_name:
        argv.append(f"--kernel-name={kernel_name}")
    argv.append(f"--aic-metrics={','.join(aic_metrics)}")
    if launch_skip:
        argv.append(f"--launch-skip-before-match={launch_skip}")
    return [*argv, f"--launch-count={launch_count}", *app_argv]
