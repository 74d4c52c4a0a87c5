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


# msprof op's metric sets (msOpProf user guide, --aic-metrics). KernelScale is the one that honours a
# kernel's MetricsProfStart()/MetricsProfStop() region; without --aic-metrics the region is not
# collected. KernelScale exists on Atlas A2/A3 (and Ascend 950) only; mode 02 runs its NPU path on
# Atlas A2/A3 only (common.backend.is_atlas_a2_a3), so it always passes this pair.
MSPROF_OP_METRICS_REGION = ("KernelScale", "PipeUtilization")
MAX_LAUNCH_COUNT = 5000  # msprof op --launch-count accepts 1..5000
MAX_LAUNCH_SKIP = 1000  # msprof op --launch-skip-before-match accepts 0..1000


def msprof_op_argv(
    msprof: str,
    output: Path,
    app_argv: list[str],
    kernel_name: str | None = None,
    launch_count: int = 1,
    aic_metrics: tuple[str, ...] = MSPROF_OP_METRICS_REGION,
    launch_skip: int = 0,
) -> list[str]:
    """``msprof op --output=<dir> [--kernel-name=K] --aic-metrics=<sets> [--launch-skip-before-match=S]
    --launch-count=N <app argv...>``: per-block PMU of N launches of one kernel.

    The first ``launch_skip`` launches are skipped before collection starts, whatever kernel they
    run (the tool counts every launch, then matches ``--kernel-name``); the results land in
    ``<dir>/OPPROF_*/`` (OpBasicInfo.csv, PipeUtilization.csv, ...). The command is ``msprof op``;
    the tool's documentation names it msOpProf (MindStudio Ops Profiler), and ``msopprof`` is the
    executable in the CANN package that ``msprof op`` runs.
    """
    if not app_argv:
        raise ValueError("msprof op needs an application to run")
    if not 1 <= launch_count <= MAX_LAUNCH_COUNT:
        raise ValueError(f"launch_count must be in 1..{MAX_LAUNCH_COUNT}")
    if not 0 <= launch_skip <= MAX_LAUNCH_SKIP:
        raise ValueError(f"launch_skip must be in 0..{MAX_LAUNCH_SKIP}")
    if not aic_metrics:
        raise ValueError("msprof op needs at least one --aic-metrics set")
    argv = [msprof, "op", f"--output={output}"]
    if kernel_name:
        argv.append(f"--kernel-name={kernel_name}")
    argv.append(f"--aic-metrics={','.join(aic_metrics)}")
    if launch_skip:
        argv.append(f"--launch-skip-before-match={launch_skip}")
    return [*argv, f"--launch-count={launch_count}", *app_argv]


# msprof op simulator (msOpProf user guide, simulator mode): the simulator type comes from --soc-version
# (a folder name under ${INSTALL_DIR}/tools/simulator); KernelScale is an on-board metric set only, the
# simulator's --aic-metrics are PipeUtilization / ResourceConflictRatio (both collected by default) and
# PMSampling, so the lab passes none.
def msprof_op_simulator_argv(
    msprof: str,
    output: Path,
    app_argv: list[str],
    soc_version: str,
    kernel_name: str | None = None,
    launch_count: int = 1,
) -> list[str]:
    """``msprof op simulator --soc-version=<soc> --output=<dir> [--kernel-name=K] --launch-count=N <app argv...>``.

    The results land in ``<dir>/OPPROF_*/``: ``dump/`` and ``simulator/`` with one folder per core
    (``core<i>.veccore<j>/`` holding ``core<i>.veccore<j>_code_exe.csv``, ``..._instr_exe.csv`` and
    ``trace.json``), plus ``simulator/trace.json`` and ``visualize_data.bin`` for all cores.
    """
    if not app_argv:
        raise ValueError("msprof op simulator needs an application to run")
    if not soc_version.startswith("Ascend"):
        raise ValueError(f"soc_version {soc_version!r} should look like Ascend910B1")
    if not 1 <= launch_count <= MAX_LAUNCH_COUNT:
        raise ValueError(f"launch_count must be in 1..{MAX_LAUNCH_COUNT}")
    argv = [msprof, "op", "simulator", f"--soc-version={soc_version}", f"--output={output}"]
    if kernel_name:
        argv.append(f"--kernel-name={kernel_name}")
    return [*argv, f"--launch-count={launch_count}", *app_argv]
