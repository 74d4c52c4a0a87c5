"""In-process kernel profiling with the names of pyasc's ``asc.lib.profiling``, on both backends.

Code written against pyasc's profiler runs here unchanged::

    from common.collect.profiling import Profiler, task_time_median

    profiler = Profiler()                       # a temporary result folder, removed after parsing
    with profiler.profile(device_id=0):         # start -> your block -> stop -> export -> parse
        launch()
    print(task_time_median(profiler.last_result.tasks, skip=3))   # µs, warm-up launches dropped

On the **npu** backend the collection is CANN's profiling API (``aclprofInit`` ... ``aclprofFinalize``
in ``libmsprofiler.so``): through pyasc's ``MsprofInterface`` when pyasc is installed, else through
:class:`MsprofInterface` here; ``msprof --export=on`` then writes the CSVs. It profiles the calling
process only: a kernel launched by another program needs the msprof command line (mode 02 does that).

On the **portable** backend nothing can collect device data. The profiled block must itself write a
run in msprof's layout under :attr:`Profiler.result_path` (mode 02's AscendC twin does: its timers
become ``PROF_*/mindstudio_profiler_output/op_summary_*.csv``), and the profiler reads that back
like an export. Task types stay what the files say (``CPU`` for the twin), and a value the files
do not hold stays missing.
"""

from __future__ import annotations

import ctypes
import datetime as dt
import enum
import os
import shutil
import statistics
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.backend import Backend, detect, parse_device_id
from common.errors import LabError

MSPROFILER_LIBRARY = "libmsprofiler.so"  # CANN's profiling API (acl/acl_prof.h)
ASCENDCL_LIBRARY = "libascendcl.so"  # aclrtGetDevice, for start() without a device id
TEMP_PREFIX = "msprof_lab_profiler_"
RUN_PREFIX = "PROF_"  # one folder per collection, written by aclprofInit/Start (NPU) or the twin (portable)

# The task types task_time_median counts, as pyasc's result.py lists them: AI Core, AI Vector and mixed kernels.
AI_CORE_TASK_TYPES = frozenset(
    {"AI_CORE", "AIV_SQE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "KERNEL_AIVEC", "KERNEL_AICORE"}
)
PORTABLE_TASK_TYPE = "CPU"  # what the lab writes for a task that ran on the host (the portable backend)

# Which export file a run is read from, in order of preference, and its columns: (id, name, type, duration µs).
TASK_FILES = (
    ("op_summary_", ("Task ID", "Op Name", "Task Type", "Task Duration(us)")),
    ("task_time_", ("task_id", "kernel_name", "kernel_type", "task_time(us)")),
)


class ProfilingError(LabError, RuntimeError):
    """A profiling step failed. A RuntimeError too, as pyasc raises, so code written for it catches it."""


class AicoreMetrics(enum.IntEnum):
    """``aclprofAicoreMetrics``: the AI Core PMU group one run collects (``aicoreMetrics`` of aclprofCreateConfig)."""

    ARITHMETIC_UTILIZATION = 0
    PIPE_UTILIZATION = 1
    MEMORY_BANDWIDTH = 2
    L0B_AND_WIDTH = 3
    RESOURCE_CONFLICT_RATIO = 4
    MEMORY_UB = 5
    L2_CACHE = 6
    PIPE_EXECUTE_UTILIZATION = 7  # not on Atlas A2 / A3, says the documentation
    MEMORY_ACCESS = 8
    NONE = 0xFF


class ProfileType(enum.IntFlag):
    """``ACL_PROF_*``: what a run collects (``dataTypeConfig`` of aclprofCreateConfig), OR-ed together."""

    ACL_API = 0x0001
    TASK_TIME = 0x0002
    AICORE_METRICS = 0x0004  # needed for ``metrics`` to take effect
    AICPU = 0x0008
    L2CACHE = 0x0010
    HCCL_TRACE = 0x0020
    TRAINING_TRACE = 0x0040
    MSPROFTX = 0x0080
    RUNTIME_API = 0x0100
    TASK_TIME_L0 = 0x0800
    TASK_MEMORY = 0x1000
    OP_ATTR = 0x4000


DEFAULT_PROFILE_TYPES = ProfileType.TASK_TIME | ProfileType.AICORE_METRICS | ProfileType.L2CACHE


def profile_type_list(profile_types: ProfileType | int | Iterable[ProfileType | int] | None) -> list[ProfileType]:
    """One ProfileType per bit: from a combined flag, an iterable of flags, or None (the default three)."""
    if profile_types is None:
        profile_types = DEFAULT_PROFILE_TYPES
    items = [profile_types] if isinstance(profile_types, int) else list(profile_types)
    combined = 0
    for item in items:
        combined |= int(item)
    unknown = combined & ~sum(ProfileType)
    if unknown:
        raise LabError(
            f"profile_types holds unknown bits {unknown:#x}",
            "use ProfileType members, e.g. ProfileType.TASK_TIME | ProfileType.AICORE_METRICS",
        )
    return [member for member in ProfileType if member & combined]


def profile_flags(profile_types: ProfileType | int | Iterable[ProfileType | int] | None) -> int:
    """The ``dataTypeConfig`` aclprofCreateConfig takes: the OR of :func:`profile_type_list`."""
    flags = 0
    for member in profile_type_list(profile_types):
        flags |= int(member)
    return flags


@dataclass(frozen=True)
class ProfilingTask:
    """One task of an export: its task id (None where the file has none), name, task type, duration (µs)."""

    id: int | None
    name: str
    type: str
    duration: float


@dataclass(frozen=True)
class ProfilingResult:
    """The tasks of one run folder (``run_id``: its name under the result path) and when they were read."""

    tasks: tuple[ProfilingTask, ...]
    run_id: str
    stored_at: dt.datetime


def task_time_median(tasks: Iterable[Any], name: str | None = None, skip: int = 0) -> float:
    """The median duration (µs, rounded to 3 decimals) of one kernel's AI Core tasks.

    Only tasks of the AI Core types count (:data:`AI_CORE_TASK_TYPES`). ``name`` picks the kernel;
    by default it is the name of the first AI Core task. ``skip`` drops that many of the kernel's
    first samples (the warm-up launches). On the portable backend every task is ``CPU`` (the twin's
    kernel, run on the host), and when no task has an AI Core type but all are ``CPU``, those count.
    Even counts take the mean of the two middle samples.
    """
    tasks = list(tasks)
    if not isinstance(skip, int) or skip < 0:
        raise LabError(f"skip={skip!r} is not a count", "pass how many warm-up samples to drop, e.g. skip=3")
    types = AI_CORE_TASK_TYPES
    if (
        not any(t.type in AI_CORE_TASK_TYPES for t in tasks)
        and tasks
        and all(t.type == PORTABLE_TASK_TYPE for t in tasks)
    ):
        types = frozenset({PORTABLE_TASK_TYPE})
    counted = [t for t in tasks if t.type in types]
    if name is None and counted:
        name = counted[0].name
    values = [t.duration for t in counted if t.name == name]
    if not values:
        seen = sorted({t.type for t in tasks})
        what = f"no AI Core task named {name!r}" if name is not None else "no AI Core task"
        raise ProfilingError(
            f"{what} among {len(tasks)} tasks (types: {', '.join(seen) or 'none'})",
            "profile a block that launches the kernel, and pass its name as the export writes it (Op Name)",
        )
    if skip >= len(values):
        raise ProfilingError(
            f"skip={skip} leaves none of the {len(values)} samples of {name!r}",
            f"launch the kernel more than {skip} times, or skip fewer",
        )
    return round(statistics.median(values[skip:]), 3)


class MsprofInterface:
    """ctypes over CANN's profiling API (``acl_prof.h``, in ``libmsprofiler.so``); every call checked.

    ``library``: a loaded library (a ``ctypes.CDLL`` or a stand-in with the same functions), a path,
    or None for ``libmsprofiler.so`` from the library path CANN's ``set_env.sh`` sets.
    """

    def __init__(self, library: Any = None) -> None:
        self.lib = load_library(library or MSPROFILER_LIBRARY)
        self._declare("aclprofInit", ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t])
        self._declare(
            "aclprofCreateConfig",
            ctypes.c_void_p,
            [ctypes.POINTER(ctypes.c_uint32), ctypes.c_uint32, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64],
        )
        for name in ("aclprofStart", "aclprofStop", "aclprofDestroyConfig"):
            self._declare(name, ctypes.c_int, [ctypes.c_void_p])
        self._declare("aclprofFinalize", ctypes.c_int, [])

    def _declare(self, name: str, restype: Any, argtypes: list[Any]) -> None:
        function = getattr(self.lib, name)
        function.restype, function.argtypes = restype, argtypes

    def call(self, name: str, *args: Any) -> None:
        """Call an ``aclError`` function; anything but 0 (ACL_SUCCESS) is an error naming the call."""
        code = getattr(self.lib, name)(*args)
        if code != 0:
            raise ProfilingError(
                f"{name} returned aclError {code}",
                "see the plog under $HOME/ascend/log (ASCEND_PROCESS_LOG_PATH when set)",
            )

    def init(self, result_path: str) -> None:
        """``aclprofInit``: where the raw data goes (one ``PROF_*`` folder per collection)."""
        path = os.fsencode(result_path)
        self.call("aclprofInit", path, len(path))

    def create_config(
        self, device_ids: Iterable[int], metric: AicoreMetrics, types: Iterable[ProfileType] | ProfileType | None = None
    ) -> ctypes.c_void_p:
        """``aclprofCreateConfig(deviceIdList, deviceNums, aicoreMetrics, NULL, dataTypeConfig)``."""
        ids = [int(d) for d in device_ids]
        flags = profile_flags(types)
        config = self.lib.aclprofCreateConfig((ctypes.c_uint32 * len(ids))(*ids), len(ids), int(metric), None, flags)
        if not config:
            raise ProfilingError(
                f"aclprofCreateConfig returned NULL for devices {ids}, metrics {AicoreMetrics(metric).name}",
                "check the device ids are this process's logical devices and the metric suits the SoC",
            )
        return ctypes.c_void_p(config)

    def start(self, config: ctypes.c_void_p) -> None:
        self.call("aclprofStart", config)

    def stop(self, config: ctypes.c_void_p) -> None:
        self.call("aclprofStop", config)

    def destroy_config(self, config: ctypes.c_void_p) -> None:
        self.call("aclprofDestroyConfig", config)

    def finalize(self) -> None:
        self.call("aclprofFinalize")


def load_library(library: Any) -> Any:
    """A loaded library as it is; a name or path through ``ctypes.CDLL``, a failure as one clear line."""
    if not isinstance(library, (str, os.PathLike)):
        return library
    try:
        return ctypes.CDLL(os.fspath(library))
    except OSError as err:
        raise LabError(
            f"cannot load {os.fspath(library)}: {err}",
            "source CANN's set_env.sh first (it puts CANN's lib64 on LD_LIBRARY_PATH)",
        ) from err


def npu_interface() -> Any:
    """pyasc's MsprofInterface when pyasc is installed, else the lab's: the same methods either way."""
    try:
        from asc.lib.profiling import MsprofInterface as PyascInterface
    except ImportError:
        return MsprofInterface()
    return PyascInterface()


def current_device() -> int:
    """The device this process has set: pyasc's runtime when installed, else ``aclrtGetDevice``."""
    try:
        from asc.lib import runtime
    except ImportError:
        runtime = None
    if runtime is not None:
        return int(runtime.current_device())
    lib = load_library(ASCENDCL_LIBRARY)
    device = ctypes.c_int32(-1)
    code = lib.aclrtGetDevice(ctypes.byref(device))
    if code != 0:
        raise LabError(
            f"aclrtGetDevice returned aclError {code}: this process has set no device",
            "call aclrtSetDevice before Profiler.start, or pass device_id=<logical id>",
        )
    return device.value


def read_run_tasks(run_dir: Path) -> list[ProfilingTask]:
    """The tasks of one run folder: every ``op_summary_*.csv`` under it, else every ``task_time_*.csv``.

    A missing cell (msprof's ``N/A``) stays missing: the task id None, the name or type ``N/A``.
    """
    from common.formats.readers import MSPROF
    from common.formats.table import read_table

    for prefix, (id_col, name_col, type_col, duration_col) in TASK_FILES:
        files = sorted(p for p in run_dir.rglob(f"{prefix}*.csv") if p.is_file())
        tasks: list[ProfilingTask] = []
        for path in files:
            table = read_table(path, [name_col, type_col, duration_col], MSPROF)
            ids = table.numbers(id_col, integer=True, minimum=0).to_list()
            durations = table.numbers(duration_col, required=True, minimum=0).to_list()
            names, types = table.strings(name_col).to_list(), table.strings(type_col).to_list()
            tasks += [
                ProfilingTask(None if i is None else int(i), n or "N/A", t or "N/A", d)
                for i, n, t, d in zip(ids, names, types, durations)
            ]
        if files:
            return tasks
    raise ProfilingError(
        f"{run_dir} holds no op_summary_*.csv or task_time_*.csv",
        "export the run first (Profiler.export, or msprof --export=on --output=<that folder>)",
    )


class Profiler:
    """Profile a block of this process; parse its export into :class:`ProfilingResult` objects.

    ``result_path``: where runs are written. Without one, a temporary folder is made at ``start``
    and :meth:`cleanup` removes it (only that folder, only when it made it). ``interface``: the
    aclprof* calls (:class:`MsprofInterface`, pyasc's); found on the
    npu backend when not given, none on the portable one (nothing is collected there).

    Beyond pyasc's names: :meth:`init` and :meth:`finalize` split the session from the collection,
    for a program whose documented order puts ``aclprofInit`` before something the collection must
    not hold (pyACL: before the model is loaded), and ``stop(finalize=False)`` keeps it open.
    """

    def __init__(
        self, result_path: str | os.PathLike | None = None, *, backend: Backend | None = None, interface: Any = None
    ) -> None:
        self.backend = backend or detect()
        if interface is None and self.backend.is_npu:
            interface = npu_interface()
        self.msprof = interface  # the aclprof* calls; None on the portable backend
        self.config: Any = None
        self.started = False
        self.initialized = False  # aclprofInit done and not finalized
        self.result_path: str | None = None if result_path is None else os.fspath(result_path)
        self.auto_remove = result_path is None
        self.results: dict[str, ProfilingResult] = {}
        self._runs_before: set[str] = set()

    @property
    def last_result(self) -> ProfilingResult:
        """The result stored last."""
        if not self.results:
            raise ProfilingError(
                "no profiling result is stored yet",
                "profile a block with Profiler.profile(), or call store_last_result() after stop()",
            )
        return self.results[next(reversed(self.results))]

    def init(self) -> None:
        """Open the profiling session now (aclprofInit into the result path); :meth:`start` then only creates the
        config and starts. Portable: only the result folder is made."""
        if self.initialized:
            raise LabError("this Profiler's session is already open", "call finalize() before init() again")
        if self.result_path is None:
            self.result_path = tempfile.mkdtemp(prefix=TEMP_PREFIX)
        else:
            Path(self.result_path).mkdir(parents=True, exist_ok=True)
            self.result_path = str(Path(self.result_path).resolve())
        self._runs_before = set(self.run_ids())
        if self.msprof is not None:
            self.msprof.init(self.result_path)
        self.initialized = True

    def start(
        self,
        device_id: int | None = None,
        metrics: AicoreMetrics = AicoreMetrics.PIPE_UTILIZATION,
        profile_types: ProfileType | Iterable[ProfileType] | None = None,
    ) -> None:
        """Start collecting on ``device_id`` (default: the device this process set); portable: mark the start.

        ``profile_types`` defaults to TASK_TIME | AICORE_METRICS | L2CACHE. Opens the session first unless
        :meth:`init` did; a failure then closes what this call opened.
        """
        if self.started:
            raise LabError("this Profiler is already started", "call stop() before starting it again")
        types = profile_type_list(profile_types)
        metrics = AicoreMetrics(metrics)
        device = None
        if self.msprof is not None:
            device = current_device() if device_id is None else parse_device_id(device_id)
        opened_here = not self.initialized
        if opened_here:
            self.init()
        if self.msprof is not None:
            try:
                self.config = self.msprof.create_config([device], metrics, types)
                self.msprof.start(self.config)
            except BaseException:  # leave no profiling session behind: destroy what was made, finalize
                try:
                    if self.config is not None:
                        self.msprof.destroy_config(self.config)
                finally:
                    self.config = None
                    if opened_here:
                        self.finalize()
                raise
        self.started = True

    def stop(self, finalize: bool = True) -> None:
        """Stop collecting (aclprofStop, DestroyConfig) and, unless ``finalize`` is False, end the session."""
        if not self.started:
            return
        self.started = False
        config, self.config = self.config, None
        try:
            if self.msprof is not None:
                try:
                    self.msprof.stop(config)
                finally:
                    self.msprof.destroy_config(config)
        finally:
            if finalize:
                self.finalize()

    def finalize(self) -> None:
        """End the profiling session (aclprofFinalize); nothing when none is open."""
        if not self.initialized:
            return
        self.initialized = False
        if self.msprof is not None:
            self.msprof.finalize()

    def new_run_ids(self) -> list[str]:
        """The run folders that appeared under the result path since :meth:`start`."""
        return sorted(set(self.run_ids()) - self._runs_before)

    def export(self) -> None:
        """NPU: ``msprof --export=on`` on every run of this session. Portable: check the block wrote one."""
        new = self.new_run_ids()
        if not new:
            how = (
                "the collection wrote nothing: did the block launch a kernel in this process?"
                if self.backend.is_npu
                else "on the portable backend the profiled block writes the run itself (mode 02's twin: "
                "common.modes.ascendc.twin_profile.write_portable_profile(Path(profiler.result_path), ...))"
            )
            raise ProfilingError(f"no {RUN_PREFIX}* folder appeared under {self.result_path} while profiling", how)
        if not self.backend.is_npu:
            return  # the twin writes msprof's export layout directly
        from common.collect import launcher
        from common.collect.npu_commands import msprof_export_argv

        msprof = self.backend.tools.get("msprof")
        if not msprof:
            raise LabError("msprof not found, so the run cannot be exported", "source CANN's set_env.sh")
        for run_id in new:
            run = launcher.run_command(msprof_export_argv(msprof, Path(self.result_path) / run_id), capture=True)
            run.raise_if_stopped()
            if not run.ok:
                tail = run.output.strip().splitlines()[-1:] or [""]
                raise ProfilingError(
                    f"msprof --export on {run_id} {run.describe}: {tail[0]}",
                    f"see {Path(self.result_path) / run_id / 'mindstudio_profiler_log'}",
                )

    def cleanup(self) -> None:
        """Remove the result folder if this Profiler made it (no ``result_path`` was given); else nothing."""
        if self.auto_remove and self.result_path and os.path.isdir(self.result_path):
            shutil.rmtree(self.result_path)
        if self.auto_remove:
            self.result_path = None

    def run_ids(self) -> list[str]:
        """The ``PROF_*`` folders under the result path, by name (msprof's names sort by start time)."""
        root = Path(self.result_path) if self.result_path else None
        if root is None or not root.is_dir():
            return []
        return sorted(p.name for p in root.iterdir() if p.is_dir() and p.name.startswith(RUN_PREFIX))

    def store_result(self, run_id: str) -> ProfilingResult:
        """Parse the export of run folder ``run_id``, keep it in :attr:`results` and return it."""
        run_dir = Path(self.result_path or "") / run_id
        if not self.result_path or not run_dir.is_dir():
            raise ProfilingError(
                f"{run_dir} is not a run folder", f"pass one of: {', '.join(self.run_ids()) or 'none here yet'}"
            )
        result = ProfilingResult(tuple(read_run_tasks(run_dir)), run_id, stored_at=dt.datetime.now())
        self.results[run_id] = result
        return result

    def store_last_result(self) -> ProfilingResult:
        """Parse the latest run folder (the greatest ``PROF_*`` name)."""
        runs = self.run_ids()
        if not runs:
            raise ProfilingError(
                f"no {RUN_PREFIX}* folder under {self.result_path}", "profile a block first (Profiler.profile)"
            )
        return self.store_result(runs[-1])

    @contextmanager
    def profile(
        self,
        device_id: int | None = None,
        cleanup: bool = True,
        metrics: AicoreMetrics = AicoreMetrics.PIPE_UTILIZATION,
        profile_types: ProfileType | Iterable[ProfileType] | None = None,
    ) -> Iterator[Profiler]:
        """start -> the block -> stop -> export -> parse (:attr:`last_result`); then :meth:`cleanup` if asked.

        A block that raises still stops the collection; nothing is exported or parsed then.
        """
        try:
            self.start(device_id, metrics=metrics, profile_types=profile_types)
            try:
                yield self
            finally:
                self.stop()
            self.export()
            self.store_last_result()
        finally:
            if cleanup:
                self.cleanup()
