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


def msprof_op_argv(
    msprof: str, output: Path, app_argv: list[str], kernel_name: str | None = None, launch_count: int = 1
) -> list[str]:
    """``msprof op --output=<dir> [--kernel-name=K] --launch-count=N <app argv...>``: per-block PMU of one kernel.

    The results land in ``<dir>/OPPROF_*/`` (OpBasicInfo.csv, PipeUtilization.csv, ...); the
    kernel's ``MetricsProfStart()``/``MetricsProfStop()`` bound the region that is measured.
    """
    if not app_argv:
        raise ValueError("msprof op needs an application to run")
    if launch_count < 1:
        raise ValueError("launch_count must be at least 1")
    argv = [msprof, "op", f"--output={output}"]
    if kernel_name:
        argv.append(f"--kernel-name={kernel_name}")
    return [*argv, f"--launch-count={launch_count}", *app_argv]
