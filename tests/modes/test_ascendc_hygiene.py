"""Mode 02's C++ under the sanitizers, and the NPU branch of main.cpp against a recording ACL stub.

What this proves and what it does not:
- The portable build (main.cpp + add_kernel.cpp + the twin's headers) runs clean under AddressSanitizer,
  LeakSanitizer and UndefinedBehaviorSanitizer, and so do the twin's self-test scenarios.
- main.cpp's NPU branch, compiled unchanged against ``tests/native/acl_stub`` (CANN's names and
  signatures for the ten calls it makes), releases exactly what it acquired, last first, when
  each ACL call fails in turn, and reports the failing call by name. The stub's buffers and
  streams are heap allocations, so LeakSanitizer would also see a missing release.
- It does not prove that the real CANN headers match the stub's declarations, that the real
  runtime behaves like the stub, or anything about ascendc_library's generated launch code:
  only an NPU run shows those.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import ROOT

MODE = ROOT / "02_api_AscendC"
SRC = MODE / "src"
TWIN = ROOT / "common" / "modes" / "ascendc" / "twin"  # the CPU stand-in headers of the AscendC API
STUB = ROOT / "tests" / "native" / "acl_stub"
CXX = shutil.which("g++") or shutil.which("clang++")
SANITIZE = ["-O0", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
SANITIZER_REPORT = re.compile(r"ERROR: (Address|Leak)Sanitizer|runtime error:|SUMMARY: \w+Sanitizer")
SAN_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1"}

pytestmark = pytest.mark.skipif(CXX is None, reason="needs a C++ compiler (g++ or clang++)")


def compile_cxx(out: Path, std: str, *args: str) -> Path:
    proc = subprocess.run(
        [CXX, f"-std={std}", *SANITIZE, *args, "-o", str(out)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr  # a compiler that cannot link the sanitizers fails here, not skips
    return out


def run_clean(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env={**os.environ, **SAN_ENV, **kwargs.pop("env", {})},
        timeout=120,
        check=False,
        **kwargs,
    )
    assert not SANITIZER_REPORT.search(proc.stderr), proc.stderr
    return proc


# ----- the portable twin under the sanitizers ---------------------------------------------------------
def test_portable_host_program_is_sanitizer_clean(tmp_path: Path) -> None:
    exe = compile_cxx(
        tmp_path / "add_custom_main",
        "c++20",
        "-DLAB_RUN_PORTABLE",
        "-DLAB_METRICS_PROF_REGION",
        "-I",
        str(TWIN),
        str(SRC / "main.cpp"),
        str(SRC / "add_kernel.cpp"),
        "-pthread",
    )
    timings = tmp_path / "timings.csv"
    proc = run_clean([str(exe), "--warmup", "1", "--launches", "3"], env={"ASCENDC_TWIN_TIMINGS": str(timings)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verified: 8192 of 8192 elements equal 0x4000 in each of 4 launches" in proc.stdout
    assert "kernel sizes: total_length=8192 block_dim=8 block_length=1024" in proc.stdout  # from add_kernel.cpp
    assert len(timings.read_text().splitlines()) == 1 + 4 * 8  # header + 4 launches (1 warm-up) x 8 blocks
    bad = run_clean([str(exe), "--launches", "0"])  # a usage error takes the same clean exit
    assert bad.returncode == 2 and "bad argument '--launches'" in bad.stderr


@pytest.fixture(scope="module")
def selftest(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("selftest_san") / "twin_selftest"
    return compile_cxx(out, "c++20", "-I", str(TWIN), str(ROOT / "tests" / "native" / "twin_selftest.cpp"), "-pthread")


SCENARIOS = [
    "ok",
    "alloc-over-depth",
    "deque-empty",
    "enque-over-depth",
    "tile-too-big",
    "gm-past-end",
    "partial-block",
    "free-twice",
    "free-wrong-queue",
    "missing-free",
    "write-after-enque",
]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_twin_rules_are_sanitizer_clean(selftest: Path, scenario: str) -> None:
    """The twin stops API misuse with its own message, before any out-of-bounds access happens."""
    proc = run_clean([str(selftest), scenario])
    assert (proc.returncode == 0) == (scenario == "ok"), proc.stderr
    if scenario != "ok":
        assert "twin_selftest.cpp:" in proc.stderr


def test_twin_fp16_is_sanitizer_clean(selftest: Path) -> None:
    pairs = "".join(f"{a:04x} {b:04x}\n" for a in range(0, 0x10000, 257) for b in (0x0001, 0x3C00, 0x7BFF, 0xFC00))
    proc = run_clean([str(selftest), "fp16-add"], input=pairs)
    assert proc.returncode == 0 and len(proc.stdout.split()) == len(pairs.splitlines())


# ----- main.cpp's NPU branch against the recording ACL stub ---------------------------------------------
LAUNCHES = 2
WARMUP = 1
SETUP_CALLS = ["aclInit", "aclrtSetDevice", "aclrtCreateStream", "aclrtMalloc", "aclrtMalloc", "aclrtMalloc"]
PER_LAUNCH = [
    "aclrtMemcpy",
    "aclrtMemcpy",
    "aclrtMemcpy",
    "aclrtlaunch_add_custom",
    "aclrtSynchronizeStream",
    "aclrtMemcpy",
]
FAILABLE = SETUP_CALLS + PER_LAUNCH * (WARMUP + LAUNCHES)  # 24: every call that can fail, in order
IN_SOURCE = {"aclrtlaunch_add_custom": "ACLRT_LAUNCH_KERNEL(add_custom)"}  # what CHECK_ACL names
RELEASES = {
    "aclFinalize": "session",
    "aclrtResetDevice": "device",
    "aclrtDestroyStream": "stream",
    "aclrtFree": "buffer",
}


@pytest.fixture(scope="module")
def npu_branch(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("npu_stub") / "add_custom_main_npu"
    return compile_cxx(
        out,
        "c++17",
        "-DLAB_RUN_NPU",
        "-I",
        str(STUB),
        "-I",
        str(TWIN),
        str(SRC / "main.cpp"),
        str(STUB / "acl_stub.cpp"),
    )


def run_stub(exe: Path, log: Path, **env: str) -> tuple[subprocess.CompletedProcess, list[tuple[str, ...]]]:
    proc = run_clean(
        [str(exe), "--warmup", str(WARMUP), "--launches", str(LAUNCHES)], env={"LAB_ACL_LOG": str(log), **env}
    )
    return proc, [tuple(line.split()) for line in log.read_text().splitlines()]


def assert_released_last_first(events: list[tuple[str, ...]]) -> None:
    assert not [e for e in events if e[0] == "bad"], events
    acquired = [e[1:] for e in events if e[0] == "acquire"]
    released = [e[1:] for e in events if e[0] == "release"]
    assert released == acquired[::-1], (acquired, released)


def test_npu_branch_success_path_releases_everything(npu_branch: Path, tmp_path: Path) -> None:
    proc, events = run_stub(npu_branch, tmp_path / "log")
    assert proc.returncode == 0, proc.stderr
    assert "verified: 8192 of 8192 elements equal 0x4000 in each of 3 launches" in proc.stdout
    assert [e[1] for e in events if e[0] == "call"] == FAILABLE
    assert [e[1] for e in events if e[0] == "acquire"] == ["session", "device", "stream", "buffer", "buffer", "buffer"]
    assert_released_last_first(events)


@pytest.mark.fault
@pytest.mark.parametrize("step", range(len(FAILABLE)), ids=[f"{i}-{c}" for i, c in enumerate(FAILABLE)])
def test_npu_branch_failing_at_each_call_releases_what_it_acquired(npu_branch: Path, tmp_path: Path, step: int) -> None:
    proc, events = run_stub(npu_branch, tmp_path / "log", LAB_ACL_FAIL_AT=str(step))
    call = FAILABLE[step]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and errors[0].startswith(f"Error: {IN_SOURCE.get(call, call)}(")
    assert " returned 507899 at " in errors[0] and errors[0].endswith("failure injected by the test stub")
    assert ("fail", call) in events and [e[1] for e in events if e[0] == "call"] == FAILABLE[: step + 1]
    assert_released_last_first(events)
    assert "verified:" not in proc.stdout


@pytest.mark.fault
@pytest.mark.parametrize("release", sorted(RELEASES))
def test_npu_branch_failed_release_is_reported_and_the_rest_still_released(
    npu_branch: Path, tmp_path: Path, release: str
) -> None:
    # The stub keeps what a failed release should have freed, so leak detection is off for this case only.
    proc, events = run_stub(npu_branch, tmp_path / "log", LAB_ACL_FAIL_RELEASE=release, ASAN_OPTIONS="detect_leaks=0")
    assert proc.returncode == 0, proc.stderr  # verification passed; the release failure is a named warning
    assert re.search(rf"^warning: {release}\(\w*\) returned 507899 while releasing$", proc.stderr, re.MULTILINE), (
        proc.stderr
    )
    kind = RELEASES[release]
    acquired = [e[1:] for e in events if e[0] == "acquire" and e[1] != kind]
    released = [e[1:] for e in events if e[0] == "release" and e[1] != kind]
    assert released == acquired[::-1] and acquired
