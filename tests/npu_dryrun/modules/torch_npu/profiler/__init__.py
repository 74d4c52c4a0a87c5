# TEST DOUBLE for the NPU dry run: a recording stand-in for torch_npu.profiler; never used outside tests.
"""The names of torch_npu.profiler the lab uses, with their keyword arguments, and torch_npu's output layout.

``profile(...)`` accepts torch_npu's keyword arguments only (an unknown one is a TypeError, as in
torch_npu); ``step()`` before ``start()`` raises. When the schedule's active window ends (or the
profiler stops while recording), ``on_trace_ready`` runs; ``tensorboard_trace_handler(dir)``
writes ``<dir>/<worker>_<17-digit ts>_ascend_pt/`` by replaying a real Level1 capture, with
``profiler_info[_<rank>].json`` written from the configuration actually given (torch_npu's
keys; ``rank_id`` from RANK, as a string). Nothing is measured.
"""

from __future__ import annotations

import enum
import os
import socket
import time
from pathlib import Path

import npu_dryrun_record as rec
import npu_dryrun_replay as replay


class ProfilerActivity(enum.Enum):
    CPU = "CPU"
    NPU = "NPU"


class ProfilerLevel:
    Level0 = "Level0"
    Level1 = "Level1"
    Level2 = "Level2"
    Level_none = "Level_none"


class AiCMetrics:
    PipeUtilization = "ACL_AICORE_PIPE_UTILIZATION"
    ArithmeticUtilization = "ACL_AICORE_ARITHMETIC_UTILIZATION"
    Memory = "ACL_AICORE_MEMORY_BANDWIDTH"
    MemoryL0 = "ACL_AICORE_L0B_AND_WIDTH"
    MemoryUB = "ACL_AICORE_MEMORY_UB"
    ResourceConflictRatio = "ACL_AICORE_RESOURCE_CONFLICT_RATIO"
    L2Cache = "ACL_AICORE_L2_CACHE"
    MemoryAccess = "ACL_AICORE_MEMORY_ACCESS"
    AiCoreNone = "ACL_AICORE_NONE"


class ExportType:
    Text = "text"
    Db = "db"


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


_LEVELS = {ProfilerLevel.Level0, ProfilerLevel.Level1, ProfilerLevel.Level2, ProfilerLevel.Level_none}
_METRICS = {v for k, v in vars(AiCMetrics).items() if not k.startswith("_")}


class _ExperimentalConfig:
    def __init__(
        self,
        *,
        export_type=ExportType.Text,
        profiler_level=ProfilerLevel.Level0,
        aic_metrics=AiCMetrics.AiCoreNone,
        l2_cache=False,
        op_attr=False,
        data_simplification=True,
        record_op_args=False,
        gc_detect_threshold=None,
        msprof_tx=False,
        mstx=False,
        host_sys=None,
        sys_io=False,
        sys_interconnection=False,
        mstx_domain_include=None,
        mstx_domain_exclude=None,
    ):
        if profiler_level not in _LEVELS:
            raise ValueError(f"profiler_level {profiler_level!r} is not a ProfilerLevel")
        if aic_metrics not in _METRICS:
            raise ValueError(f"aic_metrics {aic_metrics!r} is not an AiCMetrics")
        if profiler_level in (ProfilerLevel.Level1, ProfilerLevel.Level2) and aic_metrics == AiCMetrics.AiCoreNone:
            aic_metrics = AiCMetrics.PipeUtilization  # torch_npu <= 7.3: Level1/2 default to PipeUtilization
        self._profiler_level, self._aic_metrics, self._l2_cache = profiler_level, aic_metrics, l2_cache
        self._msprof_tx, self._mstx, self._data_simplification = msprof_tx, mstx, data_simplification
        self.record_op_args, self._export_type, self._op_attr = record_op_args, [export_type], op_attr
        self._gc_detect_threshold, self._host_sys = gc_detect_threshold, list(host_sys or [])
        self._sys_io, self._sys_interconnection = sys_io, sys_interconnection


class _Schedule:
    def __init__(self, wait: int, active: int, warmup: int = 0, repeat: int = 0, skip_first: int = 0):
        for name, value in (
            ("wait", wait),
            ("active", active),
            ("warmup", warmup),
            ("repeat", repeat),
            ("skip_first", skip_first),
        ):
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"schedule {name} must be a non-negative int, got {value!r}")
        if active < 1:
            raise ValueError("schedule active must be at least 1")
        self.wait, self.active, self.warmup, self.repeat, self.skip_first = wait, active, warmup, repeat, skip_first

    def __call__(self, step: int) -> ProfilerAction:
        if step < self.skip_first:
            return ProfilerAction.NONE
        step -= self.skip_first
        cycle = self.wait + self.warmup + self.active
        if self.repeat and step // cycle >= self.repeat:
            return ProfilerAction.NONE
        at = step % cycle
        if at < self.wait:
            return ProfilerAction.NONE
        if at < self.wait + self.warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if at < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    def as_dict(self) -> dict:
        return {
            "wait": self.wait,
            "active": self.active,
            "warmup": self.warmup,
            "repeat": self.repeat,
            "skip_first": self.skip_first,
        }


def schedule(*, wait: int, active: int, warmup: int = 0, repeat: int = 0, skip_first: int = 0) -> _Schedule:
    made = _Schedule(wait, active, warmup, repeat, skip_first)
    rec.record("torch_npu", "profiler.schedule", [made.as_dict()], rc=0)
    return made


def tensorboard_trace_handler(
    dir_name: str | None = None, worker_name: str | None = None, analyse_flag: bool = True, async_mode: bool = False
):
    out = Path(dir_name or "./")
    rec.record("torch_npu", "profiler.tensorboard_trace_handler", [str(out)], rc=0)

    def handler(prof: profile) -> None:
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        out.mkdir(parents=True, exist_ok=True)
        rank = os.environ.get("RANK")
        written = replay.write_ascend_pt(
            out,
            worker,
            int(rank) if rank is not None else None,
            prof.device(),
            prof.profiler_info(),
            keep_prof=not prof.config._data_simplification,
        )
        rec.record("torch_npu", "profiler.export", [str(written)], rc=0, device=prof.device())

    return handler


class profile:
    def __init__(
        self,
        activities=None,
        schedule=None,
        on_trace_ready=None,
        record_shapes=False,
        profile_memory=False,
        with_stack=False,
        with_flops=False,
        with_modules=False,
        experimental_config=None,
        use_cuda=None,
        custom_trace_id_callback=None,
    ):
        activities = list(activities or [ProfilerActivity.CPU, ProfilerActivity.NPU])
        if not all(isinstance(a, ProfilerActivity) for a in activities):
            raise TypeError("activities must be torch_npu.profiler.ProfilerActivity members")
        if experimental_config is not None and not isinstance(experimental_config, _ExperimentalConfig):
            raise TypeError("experimental_config must be torch_npu.profiler._ExperimentalConfig")
        self.activities, self.schedule, self.on_trace_ready = activities, schedule, on_trace_ready
        self.config = experimental_config or _ExperimentalConfig()
        self.common = {
            "activities": [str(a) for a in activities],
            "schedule": schedule.as_dict() if isinstance(schedule, _Schedule) else None,
            "record_shapes": record_shapes,
            "profile_memory": profile_memory,
            "with_stack": with_stack,
            "with_flops": with_flops,
            "with_modules": with_modules,
        }
        self.step_num, self.started, self.saved, self.start_ns = 0, False, False, None
        rec.record("torch_npu", "profiler.profile", [self.common, dict(vars(self.config))], rc=0)

    def device(self) -> int:
        import torch

        return torch.npu.current_device()

    def profiler_info(self) -> dict:
        info = {
            "config": {"common_config": self.common, "experimental_config": dict(vars(self.config))},
            "start_info": {"syscnt_enable": False, "freq": 100, "start_cnt": 0, "start_monotonic": self.start_ns or 0},
            "end_info": {"collectionTimeEnd": time.time_ns(), "MonotonicTimeEnd": time.monotonic_ns()},
            "torch_npu_version": "2.1.0.dryrun",
            "cann_version": os.environ.get("NPU_DRYRUN_CANN_VERSION", ""),
        }
        if "RANK" in os.environ:
            info["rank_id"] = os.environ["RANK"]
        return info

    def _action(self) -> ProfilerAction:
        return self.schedule(self.step_num) if self.schedule else ProfilerAction.RECORD

    def _save(self) -> None:
        if not self.saved and self.on_trace_ready:
            self.saved = True
            self.on_trace_ready(self)

    def start(self) -> None:
        if self.started:
            raise RuntimeError("profiler already started")
        self.started, self.start_ns = True, time.monotonic_ns()
        rec.record("torch_npu", "profiler.start", [], rc=0)

    def step(self) -> None:
        if not self.started:
            rec.record("torch_npu", "profiler.step", [self.step_num], rc=1, refused="step before start")
            raise RuntimeError("profiler.step() called before start()")
        previous = self._action()
        self.step_num += 1
        rec.record("torch_npu", "profiler.step", [self.step_num], rc=0, action=previous.name)
        if previous == ProfilerAction.RECORD_AND_SAVE:
            self._save()

    def stop(self) -> None:
        if not self.started:
            raise RuntimeError("profiler.stop() called before start()")
        if self._action() in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE) or not self.schedule:
            self._save()
        self.started = False
        rec.record("torch_npu", "profiler.stop", [self.step_num], rc=0)

    def __enter__(self) -> profile:  # noqa: PYI034  (torch_npu's own class, never subclassed)
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


from torch_npu.profiler import _non_intrusive_profile  # noqa: E402  (as torch_npu: PROF_CONFIG_PATH read at import)

_non_intrusive_profile.init()
