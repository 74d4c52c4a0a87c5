"""Mode 02 (AscendC): the portable twin's rules and fp16, verification, the end-to-end run, npu argv."""

from __future__ import annotations

import csv
import json
import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT
from helpers import lab_env as helpers_lab_env

from common.formats.twin_timings import parse_twin_timings
from common.analyze.bounds.op import busiest_pipe
from common.analyze.bounds.kernel import PIPES
from common.formats.msprof_op import read_msprof_op_pipes
from common.analyze import checks
from common.analyze.checks import Verdict
from common.analyze.checks import kernel as kernel_checks
from common.collect.npu_commands import MSPROF_OP_METRICS_REGION, MSPROF_SWITCHES, msprof_argv, msprof_op_argv
from common.errors import LabError
from common.formats.records import Task
from common.formats.schema import OP_STATISTIC, OP_SUMMARY, PMU_COLUMNS
from common.modes.ascendc import (
    TWIN_DIR,
    build_kernel,  # the CMake build
    kernel_report,  # sizes, pipe means, the report table
    twin_profile,  # the twin's timers as op_summary rows
)
from common.modes.ascendc import add_profile as driver  # the harness run.sh execs

MODE_DIR = ROOT / "02_api_AscendC"
SRC = MODE_DIR / "src"
CXX = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
needs_cxx = pytest.mark.skipif(CXX is None or shutil.which("cmake") is None, reason="needs a C++ compiler and CMake")

SIZES = {"total_length": 8192, "block_dim": 8, "block_length": 1024, "tile_num": 8, "buffer_num": 2, "tile_length": 64}


def lab_env(**extra: str) -> dict[str, str]:
    env = helpers_lab_env(**extra)
    env.pop("RUN_MODE", None)  # build.sh picks the mode from the machine, as for a user who set nothing
    return env


# --- the twin, unit by unit ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def selftest(tmp_path_factory) -> Path:
    if CXX is None:
        pytest.skip("needs a C++ compiler")
    exe = tmp_path_factory.mktemp("twin") / "twin_selftest"
    subprocess.run(
        [
            CXX,
            "-std=c++20",
            "-O1",
            "-I",
            str(TWIN_DIR),
            str(ROOT / "tests" / "native" / "twin_selftest.cpp"),
            "-pthread",
            "-o",
            str(exe),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return exe


def test_twin_correct_pipeline_passes(selftest):
    proc = subprocess.run([str(selftest), "ok"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


@pytest.mark.parametrize(
    "scenario, expected",
    [
        ("alloc-over-depth", r"AllocTensor on VECIN queue 'inQueue'.*all 2 buffers are in use"),
        ("deque-empty", r"DeQue on VECIN queue 'inQueue'.*empty"),
        ("enque-over-depth", r"EnQue on VECOUT queue 'outQueue'.*depth of 1"),
        ("tile-too-big", r"DataCopy of 128 elements into a tensor of VECIN queue 'inQueue'.*holds only 64"),
        ("gm-past-end", r"runs past the end of GlobalTensor 'xGm'"),
        ("partial-block", r"not a whole number of 32-byte blocks"),
        ("free-twice", r"FreeTensor on VECIN queue 'inQueue'.*already freed"),
        ("free-wrong-queue", r"FreeTensor on VECOUT queue 'outQueue'.*belongs to VECIN queue 'inQueue'"),
        ("missing-free", r"VECIN queue 'inQueue'.*never freed"),
        ("write-after-enque", r"DataCopy on a tensor of VECIN queue 'inQueue'.* after EnQue"),
    ],
)
def test_twin_misuse_stops_with_the_queue_named(selftest, scenario, expected):
    proc = subprocess.run([str(selftest), scenario], capture_output=True, text=True)
    assert proc.returncode != 0
    assert re.search(expected, proc.stderr), proc.stderr
    assert "twin_selftest.cpp:" in proc.stderr  # the line of the offending call


def _edge_halves() -> list[int]:
    # zeros, smallest/largest subnormals, smallest normal, 1.0 and its neighbours, max, inf, NaN
    base = [0x0000, 0x0001, 0x0002, 0x03FF, 0x0400, 0x0401, 0x3BFF, 0x3C00, 0x3C01, 0x7BFE, 0x7BFF, 0x7C00, 0x7E00]
    return base + [b | 0x8000 for b in base]


def test_twin_fp16_add_is_ieee_round_to_nearest_even(selftest):
    rng = random.Random(20240601)
    edges = _edge_halves()
    pairs = [(a, b) for a in edges for b in edges]
    pairs += [(rng.randrange(0x10000), rng.randrange(0x10000)) for _ in range(30000)]
    # Same-exponent pairs exercise ties: odd mantissa sums land exactly halfway.
    pairs += [(0x3C00 | rng.randrange(0x400), 0x3C00 | rng.randrange(0x400)) for _ in range(5000)]
    text = "".join(f"{a:04x} {b:04x}\n" for a, b in pairs)
    out = subprocess.run([str(selftest), "fp16-add"], input=text, capture_output=True, text=True, check=True).stdout
    got = np.array([int(x, 16) for x in out.split()], dtype=np.uint16)
    a = np.array([p[0] for p in pairs], dtype=np.uint16).view(np.float16)
    b = np.array([p[1] for p in pairs], dtype=np.uint16).view(np.float16)
    with np.errstate(over="ignore", invalid="ignore"):
        want = (a + b).view(np.uint16)  # numpy's fp16 add is correctly rounded (float32 is wide enough)
    assert len(got) == len(pairs)
    nan_want = np.isnan(want.view(np.float16))
    assert np.array_equal(np.isnan(got.view(np.float16)), nan_want)
    mismatch = np.nonzero((got != want) & ~nan_want)[0]
    assert mismatch.size == 0, [(hex(pairs[i][0]), hex(pairs[i][1]), hex(got[i]), hex(want[i])) for i in mismatch[:5]]


def test_twin_fp16_rounding_from_double(selftest):
    rng = random.Random(7)
    values = [
        0.0,
        -0.0,
        1.0,
        65504.0,
        65519.99,
        65520.0,
        1e6,
        2.0**-24,
        2.0**-25,
        2.0**-25 * 1.0001,
        3 * 2.0**-25,
        1.0 + 2.0**-11,
        1.0 + 3 * 2.0**-11,
        2.0**-14 - 2.0**-25,
    ]
    values += [rng.uniform(-70000, 70000) for _ in range(5000)] + [rng.uniform(-1e-4, 1e-4) for _ in range(5000)]
    text = "".join(f"{v!r}\n" for v in values)
    out = subprocess.run([str(selftest), "fp16-round"], input=text, capture_output=True, text=True, check=True).stdout
    got = [int(x, 16) for x in out.split()]
    with np.errstate(over="ignore"):
        want = np.array(values, dtype=np.float64).astype(np.float16).view(np.uint16).tolist()
    assert got == want
    assert got[5] == 0x7C00 and got[4] == 0x7BFF  # 65520 is the first value that rounds to inf
    assert got[8] == 0x0000 and got[10] == 0x0002  # 2^-25 ties to even (0); 3*2^-25 ties up to 2*2^-24


# --- the real kernel: a broken Compute() must fail verification -----------------------------------
def _build_copy(tmp_path: Path, replace: tuple[str, str]) -> Path:
    src = tmp_path / "src"
    shutil.copytree(SRC, src, ignore=shutil.ignore_patterns("__pycache__"))
    kernel = src / "add_kernel.cpp"
    text = kernel.read_text()
    assert replace[0] in text, "the test's edit no longer matches add_kernel.cpp"
    kernel.write_text(text.replace(replace[0], replace[1]))
    build = tmp_path / "build"
    cmake = shutil.which("cmake")
    for argv in (
        build_kernel.cmake_configure_argv(cmake, src, build, "portable"),
        build_kernel.cmake_build_argv(cmake, build, 2),
    ):
        subprocess.run(argv, check=True, capture_output=True, text=True)
    return build / build_kernel.BINARY_NAME


@needs_cxx
def test_broken_compute_fails_verification_with_first_mismatches(tmp_path):
    # Test material: Add only half of each tile; the other half keeps the UB's garbage (NaN).
    binary = _build_copy(
        tmp_path,
        (
            "AscendC::Add(zLocal, xLocal, yLocal, TILE_LENGTH);",
            "AscendC::Add(zLocal, xLocal, yLocal, TILE_LENGTH / 2);",
        ),
    )
    proc = subprocess.run([str(binary), "--launches", "2"], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "verification FAILED in launch 0" in proc.stdout
    assert re.search(r"index 32: expected 0x4000 \(2\), actual 0xffff \(-?nan\)", proc.stdout), proc.stdout
    assert "4096 of 8192 elements differ" in proc.stdout
    assert kernel_report.read_sizes(proc.stdout) == SIZES  # printed before the first launch, failing or not
    verdict = driver.verification_verdict(proc.returncode, proc.stdout)
    assert not verdict.ok


@needs_cxx
def test_missing_free_in_kernel_names_the_queue(tmp_path):
    # Test material: drop one FreeTensor; the next AllocTensor on that queue runs out of buffers.
    binary = _build_copy(tmp_path, ("        inQueueX.FreeTensor(xLocal);\n", "\n"))
    proc = subprocess.run([str(binary)], capture_output=True, text=True)
    assert proc.returncode != 0
    assert re.search(r"AllocTensor on VECIN queue 'inQueueX' .*InitBuffer at add_kernel\.cpp:\d+", proc.stderr)


# --- end to end, exactly as nox runs it -----------------------------------------------------------
@pytest.fixture(scope="module")
def portable_build() -> Path:
    """02's portable build in this lab, as build.sh makes it: the twin's add_custom_main."""
    if CXX is None or shutil.which("cmake") is None:
        pytest.skip("needs a C++ compiler and CMake")
    built = subprocess.run(["bash", "02_api_AscendC/build.sh"], cwd=ROOT, env=lab_env(), capture_output=True, text=True)
    assert built.returncode == 0, built.stdout + built.stderr
    assert "RUN_MODE=portable" in built.stdout
    return MODE_DIR / "build" / "add_custom_main"


def test_portable_build_and_run_end_to_end(portable_build):
    env = lab_env()
    ran = subprocess.run(["bash", "02_api_AscendC/run.sh", "0"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[0].startswith("=== msprof lab backend: PORTABLE")
    assert "[FAIL]" not in ran.stdout
    for name in (
        "build succeeds",
        "all 8192 elements verified",
        "20 measured launches",
        "pipe ratios sum to ~1",
        "bound pipe stated",
    ):
        assert any(line.startswith(f"[PASS] {name}") for line in lines), name
    assert "910B3: an estimate, not measured here" in ran.stdout

    out = MODE_DIR / "prof_out"
    (summary,) = out.glob("PROF_*/mindstudio_profiler_output/op_summary_*.csv")
    (statistic,) = out.glob("PROF_*/mindstudio_profiler_output/op_statistic_*.csv")
    with summary.open(newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == OP_SUMMARY
    body = [dict(zip(rows[0], r)) for r in rows[1:]]
    assert len(body) == driver.MEASURED_LAUNCHES
    measured = {"aiv_time(us)"} | {f"aiv_{p}_{k}" for p in PIPES for k in ("time(us)", "ratio")}
    for row in body:
        assert row["Task Type"] == "CPU" and row["Device_id"] == "host" and row["OP Type"] == "add_custom"
        assert row["Block Dim"] == "8"
        for column in PMU_COLUMNS:
            if column in measured:
                assert float(row[column]) >= 0.0, column
            else:
                assert row[column] == "N/A", column
        ratio_sum = sum(float(row[f"aiv_{p}_ratio"]) for p in PIPES)
        assert abs(ratio_sum - 1.0) <= kernel_checks.RATIO_SUM_TOLERANCE_PORTABLE
        assert float(row["aiv_time(us)"]) <= float(row["Task Duration(us)"])  # a block fits in its launch
    with statistic.open(newline="") as f:
        stats = list(csv.reader(f))
    assert stats[0] == OP_STATISTIC
    assert stats[1][:4] == ["host", "add_custom", "CPU", "20"]
    info = (out / "run_info.json").read_text()
    assert '"completed": true' in info and '"backend": "portable"' in info


@pytest.mark.parametrize("argv", [["run.sh", "abc"], ["build.sh", "--device", "abc"]])
def test_bad_device_id_is_one_error_line(argv):
    proc = subprocess.run(
        ["bash", f"02_api_AscendC/{argv[0]}", *argv[1:]], cwd=ROOT, env=lab_env(), capture_output=True, text=True
    )
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("Error: device id 'abc'")


# --- checks can fail -------------------------------------------------------------------------------
def _task(ratios: dict[str, float]) -> Task:
    pmu = {f"aiv_{p}_ratio": r for p, r in ratios.items()}
    return Task(op_name="add_custom", op_type="add_custom", task_type="CPU", start_us=0.0, duration_us=1.0, pmu=pmu)


def test_ratio_sum_check_fails_when_timers_double_count():
    good = [_task({"vec": 0.4, "scalar": 0.4, "mte2": 0.15, "mte3": 0.05})] * 20
    bad = good[:19] + [_task({"vec": 0.6, "scalar": 0.4, "mte2": 0.15, "mte3": 0.05})]
    negative = good[:19] + [_task({"vec": 0.6, "scalar": -0.2, "mte2": 0.5, "mte3": 0.1})]
    assert checks.check_ratio_sums(good, "portable").ok
    assert not checks.check_ratio_sums(bad, "portable").ok
    assert not checks.check_ratio_sums(negative, "portable").ok
    # On an NPU overlap is normal: the 910B3 estimate (kernel_report.ESTIMATE_910B3) sums to 1.02.
    assert checks.check_ratio_sums([_task({"vec": 0.04, "scalar": 0.65, "mte2": 0.33, "mte3": 0.0})], "npu").ok


def test_launch_count_and_bound_pipe():
    assert not driver.check_launch_count([_task({"vec": 1, "scalar": 0, "mte2": 0, "mte3": 0})] * 19, "x").ok
    ratios = {"vec": 0.04, "scalar": 0.65, "mte2": 0.33, "mte3": None}
    assert busiest_pipe(ratios) == ("scalar", 0.65)
    verdict = checks.check_bound(ratios)
    assert isinstance(verdict, Verdict) and verdict.ok and verdict.detail.startswith("scalar 0.650")
    assert not checks.check_bound({p: None for p in PIPES}).ok


def test_twin_timings_become_pipe_times(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(
        "launch,block,start_unix_ns,wall_ns,kernel_ns,region_ns,mte2_ns,vec_ns,mte3_ns\n"
        "0,0,1000000,50000,10000,9000,2000,5000,1000\n"
        "0,1,1000000,50000,12000,9000,2000,7000,1000\n"
    )
    (launch,) = parse_twin_timings(path)
    assert launch.start_us == 1000.0 and launch.duration_us == 50.0 and launch.aiv_time_us == 11.0
    assert launch.pipe_us == {"vec": 6.0, "scalar": 2.0, "mte2": 2.0, "mte3": 1.0}
    (task,) = twin_profile.twin_tasks([launch], SIZES)
    assert task.pmu["aiv_vec_ratio"] == pytest.approx(6 / 11) and task.task_type == "CPU"
    assert task.block_dim == 8 and task.input_shapes == "8192;8192" and task.output_shapes == "8192"


# --- npu: command builders (nothing runs) ----------------------------------------------------------
def test_cmake_argv_for_npu_passes_soc_and_cann():
    argv = build_kernel.cmake_configure_argv(
        "cmake", SRC, Path("/b"), "npu", soc_version="Ascend910B3", cann_home="/opt/my cann"
    )
    assert argv[:5] == ["cmake", "-S", str(SRC), "-B", "/b"]
    assert "-DRUN_MODE=npu" in argv and "-DSOC_VERSION=Ascend910B3" in argv
    assert "-DASCEND_CANN_PACKAGE_PATH=/opt/my cann" in argv  # one argv item: spaces are inert
    # MetricsProfStart/Stop exist on Atlas A2/A3 only (AscendC API reference): the region is compiled there only.
    for soc, region in [
        ("Ascend910B3", "ON"),
        ("Ascend910B4-1", "ON"),
        ("Ascend910_9391", "ON"),
        ("Ascend910B", "OFF"),
        ("Ascend310P3", "OFF"),
        ("Ascend310B1", "OFF"),
    ]:
        argv = build_kernel.cmake_configure_argv("cmake", SRC, Path("/b"), "npu", soc_version=soc, cann_home="/c")
        assert f"-DLAB_METRICS_PROF_REGION={region}" in argv, soc
    portable = build_kernel.cmake_configure_argv("cmake", SRC, Path("/b"), "portable")
    assert not any("LAB_METRICS_PROF_REGION" in a for a in portable)  # the twin always has the region (CMakeLists.txt)
    assert f"-DASCENDC_TWIN_DIR={TWIN_DIR}" in portable  # the stand-in headers, as -DASCEND_CANN_PACKAGE_PATH for npu
    with pytest.raises(ValueError):
        build_kernel.cmake_configure_argv("cmake", SRC, Path("/b"), "npu")
    with pytest.raises(ValueError):
        build_kernel.cmake_configure_argv("cmake", SRC, Path("/b"), "gpu")
    assert build_kernel.cmake_build_argv("cmake", Path("/b"), 0) == ["cmake", "--build", "/b", "--parallel", "1"]


def test_msprof_argv_builders_for_the_kernel():
    app = ["/x/add_custom_main", "--device", "0", "--launches", "20"]
    argv = msprof_argv("/c/bin/msprof", Path("/out dir"), app)
    assert argv[1] == "--output=/out dir" and "--aic-metrics=PipeUtilization" in argv and argv[-5:] == app
    # msprof op honours the kernel's MetricsProfStart/Stop region only with --aic-metrics=KernelScale (A2/A3),
    # and skips the warm-up launches with --launch-skip-before-match (msOpProf user guide: 0..1000).
    op = msprof_op_argv(
        "/c/bin/msprof",
        Path("/out"),
        app,
        kernel_name="add_custom",
        launch_count=1,
        aic_metrics=MSPROF_OP_METRICS_REGION,
        launch_skip=3,
    )
    assert op == [
        "/c/bin/msprof",
        "op",
        "--output=/out",
        "--kernel-name=add_custom",
        "--aic-metrics=KernelScale,PipeUtilization",
        "--launch-skip-before-match=3",
        "--launch-count=1",
        *app,
    ]
    plain = msprof_op_argv("msprof", Path("/out"), app, aic_metrics=("PipeUtilization",), launch_skip=1000)
    assert plain == [
        "msprof",
        "op",
        "--output=/out",
        "--aic-metrics=PipeUtilization",
        "--launch-skip-before-match=1000",
        "--launch-count=1",
        *app,
    ]
    for bad in (
        {"launch_count": 0},
        {"launch_count": 5001},
        {"launch_skip": -1},
        {"launch_skip": 1001},
        {"aic_metrics": ()},
    ):
        with pytest.raises(ValueError):
            msprof_op_argv("msprof", Path("/out"), app, **bad)
    with pytest.raises(ValueError):
        msprof_op_argv("msprof", Path("/out"), [])


def test_profile_npu_passes_the_device_and_skips_the_warm_up(tmp_path, monkeypatch):
    """The program selects the logical device itself (--device 3); msprof op skips the 3 warm-up launches."""
    from types import SimpleNamespace

    from common.backend import Backend

    calls = []
    summary = tmp_path / "PROF_1" / "mindstudio_profiler_output"

    def fake_run(argv, child_env=None, timeout_s=None, stderr_log=None):
        calls.append((argv, child_env))
        assert stderr_log is not None and stderr_log.parent == tmp_path / "logs"  # kept for after a failure
        if argv[1] != "op":
            summary.mkdir(parents=True, exist_ok=True)
            (summary / "op_summary_1.csv").write_text(",".join(OP_SUMMARY) + "\n")
        return 0, "kernel sizes: " + " ".join(f"{k}={v}" for k, v in SIZES.items()) + "\n"

    monkeypatch.setattr(driver, "run_binary", fake_run)
    monkeypatch.setattr(driver, "read_build_info", lambda: {"soc_version": "Ascend910B3", "run_mode": "npu"})
    backend = Backend("npu", "test", "/c", {"msprof": "/c/bin/msprof"}, tuple(range(8)))
    run = SimpleNamespace(backend=backend, out=tmp_path, device=3, child_env={"PATH": "/bin"}, timeout_s=None)
    driver.profile_npu(run, Path("/b/add_custom_main"))
    app = ["/b/add_custom_main", "--device", "3", "--warmup", "3", "--launches", "20"]
    assert [c[0] for c in calls] == [
        ["/c/bin/msprof", f"--output={tmp_path}", *MSPROF_SWITCHES, *app],
        [
            "/c/bin/msprof",
            "op",
            f"--output={tmp_path}",
            "--kernel-name=add_custom",
            "--aic-metrics=KernelScale,PipeUtilization",
            "--launch-skip-before-match=3",
            "--launch-count=1",
            *app,
        ],
    ]
    assert all("ASCEND_RT_VISIBLE_DEVICES" not in c[1] for c in calls)


def test_npu_path_is_for_atlas_a2_a3_builds_only(tmp_path):
    """The report reads the A2/A3 layout (aiv_* columns, sub_block_id): an npu build for any other SoC is
    refused before anything runs, in one line; "Ascend910B" alone is the legacy Atlas training chip, not A2."""
    from common.backend import Backend

    npu = Backend("npu", "test", "/c", {"msprof": "/c/bin/msprof"}, tuple(range(8)))
    (tmp_path / build_kernel.BINARY_NAME).write_text("")
    for soc, usable in [
        ("Ascend910B3", True),
        ("Ascend910B4-1", True),
        ("Ascend910_9391", True),
        ("Ascend310P3", False),
        ("Ascend910B", False),
        ("Ascend310B1", False),
    ]:
        (tmp_path / build_kernel.BUILD_INFO).write_text(json.dumps({"run_mode": "npu", "soc_version": soc}))
        if usable:
            assert build_kernel.usable_build(npu, tmp_path)["soc_version"] == soc
            continue
        with pytest.raises(LabError, match=f"Atlas A2/A3 profile layout.*for {soc}, whose msprof output") as err:
            build_kernel.usable_build(npu, tmp_path)
        assert "RUN_MODE=portable" in err.value.fix


def test_npu_build_reads_the_soc_of_the_device_it_is_given(tmp_path, monkeypatch):
    from common.backend import Backend

    seen = []
    monkeypatch.delenv("RUN_MODE", raising=False)
    monkeypatch.setattr(build_kernel, "detect", lambda: Backend("npu", "test", "/c", {}, tuple(range(8))))
    monkeypatch.setattr(build_kernel, "lock_mode", lambda mode_dir: None)
    monkeypatch.setattr(build_kernel, "find_cmake", lambda: "cmake")
    monkeypatch.setattr(build_kernel, "soc_version", lambda backend, device: seen.append(device) or "Ascend310P3")
    monkeypatch.setattr(build_kernel, "cmake_step", lambda argv: seen.append(argv) or False)
    assert build_kernel.build(tmp_path / "build", device=5) == 1  # the stand-in configure fails: exit 1
    assert seen[0] == 5
    assert "-DSOC_VERSION=Ascend310P3" in seen[1] and "-DLAB_METRICS_PROF_REGION=OFF" in seen[1]


def test_run_mode_choice_and_missing_tools(monkeypatch):
    from common.backend import Backend

    portable = Backend("portable", "test")
    assert build_kernel.choose_run_mode(portable, None)[0] == "portable"
    assert build_kernel.choose_run_mode(portable, "NPU")[0] == "npu"
    with pytest.raises(LabError, match="RUN_MODE='gpu'"):
        build_kernel.choose_run_mode(portable, "gpu")
    # ascendc_library builds device code only: a CPU build of it cannot compile, so it is not offered.
    assert build_kernel.RUN_MODES == ("portable", "npu")
    with pytest.raises(LabError, match="RUN_MODE=cpu is not offered: ascendc_library builds device code only"):
        build_kernel.choose_run_mode(portable, "cpu")
    with pytest.raises(ValueError):
        build_kernel.cmake_configure_argv("cmake", SRC, Path("/b"), "cpu", soc_version="Ascend910B3", cann_home="/c")
    cmake = (SRC / "CMakeLists.txt").read_text()
    main_cpp = (SRC / "main.cpp").read_text()
    assert "ASCENDC_CPU_DEBUG" not in main_cpp and "tikicpulib.h" not in main_cpp
    assert "STRINGS portable npu)" in cmake and 'RUN_MODE STREQUAL "cpu"' not in cmake
    assert driver.choose_run_mode is build_kernel.choose_run_mode  # the entry point's allow-list is the build's
    monkeypatch.setattr(build_kernel.shutil, "which", lambda name: None)
    monkeypatch.delenv("CXX", raising=False)
    with pytest.raises(LabError, match="CMake not found.*install CMake"):
        build_kernel.find_cmake()
    with pytest.raises(LabError, match="no C\\+\\+ compiler.*install"):
        build_kernel.find_cxx()


def test_kernel_source_is_the_only_kernel():
    definition = re.compile(r"void add_custom\([^)]*\)\s*\{")
    kernels = [p for p in MODE_DIR.rglob("*.cpp") if definition.search(p.read_text()) and "tests" not in p.parts]
    assert [p.name for p in kernels] == ["add_kernel.cpp"]
    text = (SRC / "add_kernel.cpp").read_text()
    for api in ("MetricsProfStart()", "MetricsProfStop()", "GetBlockIdx()", "TQue<AscendC::QuePosition::VECIN"):
        assert api in text


def test_kernel_sizes_are_set_once_and_read_from_the_program():
    # add_kernel.cpp sets them; main.cpp includes its sizes section, the harness reads what the program prints.
    setters = [
        p.name
        for p in SRC.rglob("*")
        if p.suffix in (".cpp", ".h")
        and re.search(r"constexpr\s+\w+\s+(TOTAL_LENGTH|USE_CORE_NUM|kTotalLength)\s*=\s*\d", p.read_text())
    ]
    assert setters == ["add_kernel.cpp"]
    assert '#define ADD_SIZES_ONLY\n#include "add_kernel.cpp"' in (SRC / "main.cpp").read_text()
    for module in (ROOT / "common" / "modes" / "ascendc").glob("*.py"):
        assert not re.search(r"\b(8192|1024)\b", module.read_text()), module.name
    printed = "kernel sizes: " + " ".join(f"{k}={v}" for k, v in SIZES.items()) + "\nverified: 8192 of 8192 elements\n"
    assert kernel_report.read_sizes(printed) == SIZES
    verified = driver.verification_verdict(0, printed)
    assert verified.ok and verified.name == "all 8192 elements verified"
    unsized = driver.verification_verdict(0, "verified: 8192 of 8192 elements equal 0x4000")
    assert not unsized.ok and "without its 'kernel sizes:' line" in unsized.detail


def test_msprof_op_pipe_utilization_is_read_per_vector_block(tmp_path):
    # msprof op's CSV style: NA for missing, a trailing comma on every line (msprof_formats.md §3.3).
    header = (
        "block_id,sub_block_id,aic_time(us),aiv_time(us),aiv_vec_ratio,aiv_scalar_ratio,aiv_mte2_ratio,aiv_mte3_ratio,"
    )
    folder = tmp_path / "OPPROF_20260129023104_QHUFJZWUFYIGWZSD"
    folder.mkdir()
    (folder / "PipeUtilization.csv").write_text(
        header + "\n0,cube0,2.69,NA,NA,NA,NA,NA,\n0,vector0,NA,5.0,0.04,0.60,0.30,0.10,\n"
        "1,vector0,NA,5.2,0.06,0.70,0.36,0.12,\n"
    )
    pipes = read_msprof_op_pipes(tmp_path)
    assert pipes == pytest.approx({"vec": 0.05, "scalar": 0.65, "mte2": 0.33, "mte3": 0.11})
    assert read_msprof_op_pipes(tmp_path / "none") is None
    # The multi-operator layout (OPPROF_*/<OpName>/<launch>/PipeUtilization_<ts>.csv) is read the same way.
    nested = tmp_path / "multi" / "OPPROF_20260129023105_ABCDEFGHIJKLMNOP" / "add_custom" / "0"
    nested.mkdir(parents=True)
    (nested / "PipeUtilization_20260129023105284.csv").write_text(header + "\n0,vector0,NA,5.0,0.5,0.2,0.2,0.1,\n")
    assert read_msprof_op_pipes(tmp_path / "multi") == pytest.approx(
        {"vec": 0.5, "scalar": 0.2, "mte2": 0.2, "mte3": 0.1}
    )


# --- the in-process Profiler (common/collect/profiling.py) around the built twin -----------------------
def test_the_in_process_profiler_on_a_real_twin_run(portable_build: Path) -> None:
    """common.collect.profiling's Profiler around the built twin: its tasks are the twin's own launch timers."""
    from common.backend import Backend
    from common.collect.profiling import Profiler, task_time_median

    profiler = Profiler(backend=Backend("portable", "test"))
    with profiler.profile():
        out = Path(profiler.result_path)
        # the twin writes every launch's timers to $ASCENDC_TWIN_TIMINGS at exit; the first one is the warm-up
        run = subprocess.run(
            [str(portable_build), "--warmup", "1", "--launches", "5"],
            capture_output=True,
            text=True,
            env={**os.environ, twin_profile.TIMINGS_VAR: str(out / "twin_timings.csv")},
            timeout=120,
            check=True,
        )
        launches = parse_twin_timings(out / "twin_timings.csv")[1:]
        sizes = kernel_report.read_sizes(run.stdout)
        twin_profile.write_portable_profile(out, twin_profile.twin_tasks(launches, sizes))
        made = out
    assert not made.exists() and profiler.result_path is None  # the temporary folder it made is gone
    durations = [t.duration for t in profiler.last_result.tasks]
    assert len(durations) == 5 and {t.type for t in profiler.last_result.tasks} == {"CPU"}
    assert durations == pytest.approx([launch.duration_us for launch in launches], abs=0.001)
    assert task_time_median(profiler.last_result.tasks) == pytest.approx(sorted(durations)[2], abs=0.001)
