"""common.collect.profiling: pyasc's asc.lib.profiling names on both backends, checked without an NPU.

The enum values are the documented ones (acl_prof.h); the CSV parsing runs on a real NPU capture and on
the AscendC twin's output; MsprofInterface runs against a compiled stand-in of libmsprofiler.so and a
fake library object; the context manager's order is recorded. None of this claims that an NPU ran.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES

from common.formats.twin_timings import parse_twin_timings
from common.backend import Backend
from common.collect.profiling import (
    AicoreMetrics,
    MsprofInterface,
    Profiler,
    ProfileType,
    ProfilingError,
    ProfilingResult,
    ProfilingTask,
    profile_type_list,
    task_time_median,
)
from common.errors import LabError

NPU_RUN = next((FIXTURES / "npu" / "cann85_minimal").glob("PROF_*"))
PORTABLE = Backend("portable", "test")
CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


def task(name: str, kind: str, duration: float, task_id: int | None = 0) -> ProfilingTask:
    return ProfilingTask(task_id, name, kind, duration)


# --- the enums: acl_prof.h's values --------------------------------------------------------------
def test_aicore_metrics_are_acl_prof_h_values() -> None:
    assert {m.name: m.value for m in AicoreMetrics} == {
        "ARITHMETIC_UTILIZATION": 0,
        "PIPE_UTILIZATION": 1,
        "MEMORY_BANDWIDTH": 2,
        "L0B_AND_WIDTH": 3,
        "RESOURCE_CONFLICT_RATIO": 4,
        "MEMORY_UB": 5,
        "L2_CACHE": 6,
        "PIPE_EXECUTE_UTILIZATION": 7,
        "MEMORY_ACCESS": 8,
        "NONE": 0xFF,
    }


def test_profile_types_are_acl_prof_flags() -> None:
    assert {t.name: t.value for t in ProfileType} == {
        "ACL_API": 0x0001,
        "TASK_TIME": 0x0002,
        "AICORE_METRICS": 0x0004,
        "AICPU": 0x0008,
        "L2CACHE": 0x0010,
        "HCCL_TRACE": 0x0020,
        "TRAINING_TRACE": 0x0040,
        "MSPROFTX": 0x0080,
        "RUNTIME_API": 0x0100,
        "TASK_TIME_L0": 0x0800,
        "TASK_MEMORY": 0x1000,
        "OP_ATTR": 0x4000,
    }


def test_profile_types_default_combined_and_listed() -> None:
    default = [ProfileType.TASK_TIME, ProfileType.AICORE_METRICS, ProfileType.L2CACHE]
    assert profile_type_list(None) == default
    assert profile_type_list(ProfileType.L2CACHE | ProfileType.TASK_TIME | ProfileType.AICORE_METRICS) == default
    assert profile_type_list([ProfileType.AICPU, ProfileType.ACL_API]) == [ProfileType.ACL_API, ProfileType.AICPU]
    with pytest.raises(LabError, match="unknown bits 0x200"):
        profile_type_list(0x200)  # ACL_PROF_GE_API_L0 is not one of the types pyasc offers


# --- task_time_median ----------------------------------------------------------------------------
def test_median_counts_ai_core_types_only_and_defaults_to_the_first_ai_core_name() -> None:
    tasks = [
        task("Cast", "AI_CPU", 900.0),
        task("memcpy", "MEMCPY_ASYNC", 5.0),
        task("add_custom", "AI_VECTOR_CORE", 10.0),
        task("Cast", "AI_CPU", 800.0),
        task("add_custom", "AI_VECTOR_CORE", 30.0),
        task("mm", "AI_CORE", 1000.0),
        task("add_custom", "AI_VECTOR_CORE", 20.0),
    ]
    assert task_time_median(tasks) == 20.0  # add_custom: 10, 30, 20
    assert task_time_median(tasks, name="mm") == 1000.0
    for kind in ("AI_CORE", "AIV_SQE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "KERNEL_AIVEC", "KERNEL_AICORE"):
        assert task_time_median([task("k", kind, 4.0)]) == 4.0
    for kind in ("AI_CPU", "HCCL", "MEMCPY_ASYNC", "PROFILING_ENABLE", "N/A"):
        with pytest.raises(ProfilingError):
            task_time_median([task("k", kind, 4.0)])


def test_median_skip_drops_the_first_samples_even_and_odd_counts() -> None:
    tasks = [task("k", "AI_CORE", d) for d in (100.0, 90.0, 1.0, 2.0, 3.0, 4.0)]
    assert task_time_median(tasks) == 3.5  # even: 1 2 3 4 90 100, the mean of 3 and 4
    assert task_time_median(tasks, skip=2) == 2.5  # 1 2 3 4
    assert task_time_median(tasks, skip=3) == 3.0  # 2 3 4
    assert task_time_median([task("k", "AI_CORE", d) for d in (1.0, 2.0004, 2.0006)]) == 2.0  # rounded to 3 places
    assert task_time_median([task("k", "AI_CORE", 1.0), task("k", "AI_CORE", 2.0006)]) == 1.5  # (1 + 2.0006) / 2
    assert task_time_median([task("k", "AI_CORE", 2.0006)]) == 2.001


def test_median_errors_say_what_is_missing() -> None:
    with pytest.raises(ProfilingError, match=r"no AI Core task among 0 tasks \(types: none\)"):
        task_time_median([])
    with pytest.raises(ProfilingError, match=r"no AI Core task named 'add' among 1 tasks \(types: AI_CORE\)"):
        task_time_median([task("mm", "AI_CORE", 1.0)], name="add")
    three = [task("k", "AI_CORE", 1.0)] * 3
    with pytest.raises(ProfilingError, match="skip=3 leaves none of the 3 samples of 'k'"):
        task_time_median(three, skip=3)
    with pytest.raises(LabError, match="skip=-1 is not a count"):
        task_time_median(three, skip=-1)
    err = pytest.raises(ProfilingError, task_time_median, [])
    assert isinstance(err.value, RuntimeError) and err.value.fix  # what pyasc raises, and a fix


def test_median_takes_the_twins_cpu_tasks_only_when_every_task_is_cpu() -> None:
    twin = [task("add_custom", "CPU", d, None) for d in (5.0, 7.0, 6.0)]
    assert task_time_median(twin) == 6.0 and task_time_median(twin, skip=1) == 6.5
    with pytest.raises(ProfilingError):  # an NPU capture with a host task: AI Core types only
        task_time_median(twin + [task("Cast", "AI_CPU", 1.0)])
    assert task_time_median(twin + [task("mm", "AI_CORE", 9.0)]) == 9.0


# --- parsing: a real NPU capture and the twin's output -------------------------------------------
def copy_run(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    shutil.copytree(NPU_RUN, results / NPU_RUN.name)
    return results


def test_real_npu_capture_is_read_from_op_summary(tmp_path: Path) -> None:
    profiler = Profiler(copy_run(tmp_path), backend=PORTABLE)
    result = profiler.store_last_result()
    assert isinstance(result, ProfilingResult) and result.run_id == NPU_RUN.name and profiler.last_result is result
    assert result.tasks == (
        ProfilingTask(0, "sanitized_kernel", "MIX_AIC", 42399.12),
        ProfilingTask(1, "sanitized_kernel", "MIX_AIC", 42058.48),
    )
    assert task_time_median(result.tasks) == 42228.8


def test_real_npu_capture_without_op_summary_is_read_from_task_time(tmp_path: Path) -> None:
    results = copy_run(tmp_path)
    for path in results.rglob("op_summary_*.csv"):
        path.unlink()
    result = Profiler(results, backend=PORTABLE).store_result(NPU_RUN.name)
    assert result.tasks == (
        ProfilingTask(4, "N/A", "PROFILING_ENABLE", 0.02),
        ProfilingTask(0, "sanitized_kernel", "MIX_AIC", 42401.72),
        ProfilingTask(1, "sanitized_kernel", "MIX_AIC", 42061.08),
    )
    assert task_time_median(result.tasks) == 42231.4  # PROFILING_ENABLE is not an AI Core task


def test_run_without_exports_and_unknown_run_are_errors(tmp_path: Path) -> None:
    (tmp_path / "PROF_000001_20260101000000000_AAAAAAAAAAAAAAAA" / "device_0" / "data").mkdir(parents=True)
    profiler = Profiler(tmp_path, backend=PORTABLE)
    with pytest.raises(ProfilingError, match="holds no op_summary_\\*.csv or task_time_\\*.csv"):
        profiler.store_last_result()
    with pytest.raises(ProfilingError, match="is not a run folder"):
        profiler.store_result("PROF_nope")
    with pytest.raises(ProfilingError, match="no profiling result is stored yet"):
        profiler.last_result


def write_twin_timings(path: Path, launches: list[tuple[int, int]]) -> None:
    """The twin's --timings CSV: two blocks per launch, (wall_ns, kernel_ns) per launch."""
    rows = ["launch,block,start_unix_ns,wall_ns,kernel_ns,region_ns,mte2_ns,vec_ns,mte3_ns"]
    for k, (wall, kernel) in enumerate(launches):
        start = 1_000_000_000 + k * 1_000_000
        rows += [f"{k},{b},{start},{wall},{kernel},{kernel},{kernel // 4},{kernel // 2},{kernel // 8}" for b in (0, 1)]
    path.write_text("\n".join(rows) + "\n")


def test_portable_profiler_reads_what_the_twins_writer_puts_in_msprofs_layout(tmp_path: Path) -> None:
    from common.modes.ascendc import twin_profile

    sizes = {"total_length": 8192, "block_dim": 2, "block_length": 4096}
    profiler = Profiler(tmp_path / "results", backend=PORTABLE)
    with profiler.profile(device_id=0):
        out = Path(profiler.result_path)
        write_twin_timings(out / "twin_timings.csv", [(500_000, 20_000), (700_000, 21_000), (600_000, 22_000)])
        tasks = twin_profile.twin_tasks(parse_twin_timings(out / "twin_timings.csv"), sizes)
        twin_profile.write_portable_profile(out, tasks)
    result = profiler.last_result
    assert [(t.id, t.name, t.type, t.duration) for t in result.tasks] == [
        (None, "add_custom", "CPU", 500.0),
        (None, "add_custom", "CPU", 700.0),
        (None, "add_custom", "CPU", 600.0),
    ]
    assert task_time_median(result.tasks) == 600.0 and task_time_median(result.tasks, skip=1) == 650.0
    assert (tmp_path / "results").is_dir()  # a result_path it was given is never deleted


def test_portable_block_that_writes_nothing_is_an_error_and_the_temp_dir_goes(tmp_path: Path) -> None:
    profiler = Profiler(backend=PORTABLE)
    with pytest.raises(ProfilingError, match="no PROF_\\* folder appeared") as err:
        with profiler.profile():
            made = Path(profiler.result_path)
    assert "write_portable_profile" in err.value.fix and not made.exists()
    # a run from before start() is not taken for this one
    old = copy_run(tmp_path)
    with pytest.raises(ProfilingError, match="no PROF_\\* folder appeared"):
        with Profiler(old, backend=PORTABLE).profile():
            pass
    assert (old / NPU_RUN.name).is_dir()


# --- MsprofInterface: a compiled stand-in of libmsprofiler.so, and a fake library object -----------
STANDIN_C = r"""
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
static char log_[8192];
static int token;
int standin_fail_start = 0;
static void add(const char *s) { strncat(log_, s, sizeof(log_) - strlen(log_) - 1); }
const char *standin_log(void) { return log_; }
int aclprofInit(const char *path, size_t length) {
    char b[1024]; snprintf(b, sizeof b, "init %s %zu;", path, length); add(b); return 0;
}
void *aclprofCreateConfig(uint32_t *ids, uint32_t n, int metric, const void *events, uint64_t types) {
    char b[512]; int k = snprintf(b, sizeof b, "create");
    for (uint32_t i = 0; i < n; i++) k += snprintf(b + k, sizeof b - k, " %u", ids[i]);
    snprintf(b + k, sizeof b - k, " n=%u metric=%d events=%s types=0x%llx;", n, metric, events ? "set" : "NULL",
             (unsigned long long)types);
    add(b);
    return metric == 0xFF ? NULL : &token;
}
static int seen(const char *name, const void *config) {
    char b[64]; snprintf(b, sizeof b, "%s %s;", name, config == &token ? "config" : "other"); add(b); return 0;
}
int aclprofStart(const void *c) { seen("start", c); return standin_fail_start; }
int aclprofStop(const void *c) { return seen("stop", c); }
int aclprofDestroyConfig(const void *c) { return seen("destroy", c); }
int aclprofFinalize(void) { add("finalize;"); return 0; }
"""


@pytest.fixture(scope="module")
def standin(tmp_path_factory) -> Path:
    if CC is None:
        pytest.skip("needs a C compiler")
    folder = tmp_path_factory.mktemp("standin")
    (folder / "standin.c").write_text(STANDIN_C)
    subprocess.run(
        [CC, "-shared", "-fPIC", "-o", str(folder / "libmsprofiler.so"), str(folder / "standin.c")],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return folder / "libmsprofiler.so"


def test_interface_passes_the_documented_c_arguments(standin: Path) -> None:
    lib = ctypes.CDLL(str(standin))
    lib.standin_log.restype = ctypes.c_char_p
    msprof = MsprofInterface(lib)
    msprof.init("/tmp/prof dir/é")
    config = msprof.create_config([0, 5], AicoreMetrics.MEMORY_ACCESS, [ProfileType.TASK_TIME, ProfileType.OP_ATTR])
    msprof.start(config)
    msprof.stop(config)
    msprof.destroy_config(config)
    msprof.finalize()
    assert lib.standin_log().decode().split(";")[:-1] == [
        f"init /tmp/prof dir/é {len('/tmp/prof dir/é'.encode())}",  # the byte length, not the character count
        "create 0 5 n=2 metric=8 events=NULL types=0x4002",
        "start config",
        "stop config",
        "destroy config",
        "finalize",
    ]


def test_interface_errors_name_the_call(standin: Path) -> None:
    lib = ctypes.CDLL(str(standin))
    msprof = MsprofInterface(lib)
    with pytest.raises(ProfilingError, match="aclprofCreateConfig returned NULL for devices \\[1\\], metrics NONE"):
        msprof.create_config([1], AicoreMetrics.NONE)
    fail_start = ctypes.c_int.in_dll(lib, "standin_fail_start")
    fail_start.value = 107002
    try:
        with pytest.raises(ProfilingError, match="^aclprofStart returned aclError 107002 — see the plog"):
            msprof.start(msprof.create_config([1], AicoreMetrics.PIPE_UTILIZATION))
    finally:
        fail_start.value = 0
    with pytest.raises(LabError, match="cannot load /nonexistent/libmsprofiler.so: .*source CANN's set_env.sh"):
        MsprofInterface("/nonexistent/libmsprofiler.so")


class FakeLibrary:
    """A stand-in for the loaded library: records each call with its arguments, as ctypes would receive them."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __getattr__(self, name: str):
        if not name.startswith("aclprof"):
            raise AttributeError(name)

        def function(*args):
            self.calls.append((name, *args))
            return 1234 if name == "aclprofCreateConfig" else 0

        setattr(self, name, function)
        return function


def test_interface_declares_the_c_signatures_on_a_fake_library() -> None:
    fake = FakeLibrary()
    msprof = MsprofInterface(fake)
    assert fake.aclprofCreateConfig.restype is ctypes.c_void_p
    assert fake.aclprofCreateConfig.argtypes[1:] == [ctypes.c_uint32, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64]
    assert fake.aclprofInit.argtypes == [ctypes.c_char_p, ctypes.c_size_t]
    config = msprof.create_config([3], AicoreMetrics.PIPE_UTILIZATION)
    name, ids, count, metric, events, flags = fake.calls[-1]
    assert (name, list(ids), count, metric, events, flags) == ("aclprofCreateConfig", [3], 1, 1, None, 0x16)
    assert config.value == 1234


# --- the context manager's order, on the npu backend with recording stand-ins ----------------------
class RecordingInterface:
    """The aclprof calls, recorded; start writes a raw run folder and finalize marks it, as CANN would."""

    def __init__(self, log: list[str]) -> None:
        self.log, self.path, self.run = log, None, None

    def init(self, result_path: str) -> None:
        self.log.append("init")
        self.path = Path(result_path)

    def create_config(self, device_ids, metric, types):
        self.log.append(f"create_config {list(device_ids)} {metric.name} {sorted(t.name for t in types)}")
        return "config"

    def start(self, config) -> None:
        self.log.append(f"start {config}")
        self.run = self.path / "PROF_000001_20260101000000000_RECORDEDRUNXXXXX"
        (self.run / "device_0" / "data").mkdir(parents=True)

    def stop(self, config) -> None:
        self.log.append(f"stop {config}")

    def destroy_config(self, config) -> None:
        self.log.append(f"destroy_config {config}")

    def finalize(self) -> None:
        self.log.append("finalize")
        if self.run is not None:
            (self.run / "finalized").touch()


FAKE_MSPROF = """#!{python}
import shutil, sys
from pathlib import Path
run = Path(sys.argv[2].removeprefix("--output="))
if sys.argv[1] != "--export=on" or not (run / "finalized").is_file():
    sys.exit("export before aclprofFinalize: " + " ".join(sys.argv[1:]))
(run / "mindstudio_profiler_output").mkdir()
shutil.copy({op_summary!r}, run / "mindstudio_profiler_output" / "op_summary_20260101000000.csv")
"""


def npu_backend(tmp_path: Path) -> Backend:
    msprof = tmp_path / "msprof"
    (op_summary,) = NPU_RUN.glob("mindstudio_profiler_output/op_summary_*.csv")
    msprof.write_text(FAKE_MSPROF.format(python=sys.executable, op_summary=str(op_summary)))
    msprof.chmod(0o755)
    return Backend("npu", "test", "/cann", {"msprof": str(msprof)}, (0, 1))


def test_profile_starts_runs_the_block_stops_exports_parses_then_cleans_up(tmp_path: Path) -> None:
    log: list[str] = []
    profiler = Profiler(backend=npu_backend(tmp_path), interface=RecordingInterface(log))
    with profiler.profile(device_id=1, metrics=AicoreMetrics.MEMORY_BANDWIDTH) as inside:
        made = Path(profiler.result_path)
        assert inside is profiler and made.is_dir() and made.name.startswith("msprof_lab_profiler_")
        log.append("block")
    assert log == [
        "init",
        "create_config [1] MEMORY_BANDWIDTH ['AICORE_METRICS', 'L2CACHE', 'TASK_TIME']",
        "start config",
        "block",
        "stop config",
        "destroy_config config",
        "finalize",
    ]
    assert [(t.id, t.type) for t in profiler.last_result.tasks] == [(0, "MIX_AIC"), (1, "MIX_AIC")]
    assert profiler.last_result.run_id == "PROF_000001_20260101000000000_RECORDEDRUNXXXXX"
    assert not made.exists() and profiler.result_path is None and not profiler.started


def test_profile_keeps_a_given_result_path_and_stops_when_the_block_raises(tmp_path: Path) -> None:
    log: list[str] = []
    given = tmp_path / "mine"
    profiler = Profiler(given, backend=npu_backend(tmp_path), interface=RecordingInterface(log))
    with pytest.raises(ZeroDivisionError):
        with profiler.profile(device_id=0, profile_types=ProfileType.TASK_TIME):
            log.append("block")
            1 / 0
    assert log[-4:] == ["block", "stop config", "destroy_config config", "finalize"]  # stopped, not exported
    assert log[1] == "create_config [0] PIPE_UTILIZATION ['TASK_TIME']"
    assert given.is_dir() and profiler.results == {}  # its own folder is kept; nothing was parsed
    profiler.cleanup()
    assert given.is_dir() and profiler.result_path == str(given.resolve())


def test_profile_without_cleanup_keeps_the_temporary_folder_until_cleanup(tmp_path: Path) -> None:
    profiler = Profiler(backend=npu_backend(tmp_path), interface=RecordingInterface([]))
    with profiler.profile(device_id=0, cleanup=False):
        pass
    kept = Path(profiler.result_path)
    assert (kept / profiler.last_result.run_id / "mindstudio_profiler_output").is_dir()
    profiler.cleanup()
    assert not kept.exists()


def test_bad_device_id_is_a_lab_error_before_anything_starts(tmp_path: Path) -> None:
    log: list[str] = []
    profiler = Profiler(tmp_path / "r", backend=npu_backend(tmp_path), interface=RecordingInterface(log))
    with pytest.raises(LabError, match="device id '64' is not an integer in 0..63"):
        profiler.start(device_id=64)
    assert log == [] and not profiler.started


def test_a_start_that_fails_leaves_no_session_behind(tmp_path: Path) -> None:
    log: list[str] = []

    class FailingStart(RecordingInterface):
        def start(self, config) -> None:
            self.log.append("start")
            raise ProfilingError("aclprofStart returned aclError 107002", "see the plog")

    profiler = Profiler(backend=npu_backend(tmp_path), interface=FailingStart(log))
    with pytest.raises(ProfilingError, match="aclprofStart returned aclError 107002"):
        with profiler.profile(device_id=0):
            log.append("block")
    assert log[2:] == ["start", "destroy_config config", "finalize"]  # the block never ran
    assert not profiler.started and profiler.config is None and profiler.result_path is None


def test_init_before_start_keeps_the_session_open_until_finalize(tmp_path: Path) -> None:
    """pyACL's order (mode 03): aclprofInit before the model loads, start/stop around the measured executes,
    finalize after the unload; a failing start then leaves the session to the caller's finalize."""
    log: list[str] = []
    profiler = Profiler(tmp_path / "r", backend=npu_backend(tmp_path), interface=RecordingInterface(log))
    profiler.init()
    log.append("load model")
    profiler.start(device_id=0)
    profiler.stop(finalize=False)
    log.append("unload model")
    profiler.finalize()
    profiler.finalize()  # a second one does nothing
    assert [entry.split(" [")[0] for entry in log] == [
        "init",
        "load model",
        "create_config",
        "start config",
        "stop config",
        "destroy_config config",
        "unload model",
        "finalize",
    ]

    class FailingStart(RecordingInterface):
        def start(self, config) -> None:
            raise ProfilingError("aclprofStart returned aclError 107002", "see the plog")

    log.clear()
    profiler = Profiler(tmp_path / "r", backend=npu_backend(tmp_path), interface=FailingStart(log))
    profiler.init()
    with pytest.raises(ProfilingError):
        profiler.start(device_id=0)
    assert log[-1] == "destroy_config config" and profiler.initialized  # the caller's finalize closes it
    profiler.finalize()
    assert log[-1] == "finalize" and not profiler.initialized
