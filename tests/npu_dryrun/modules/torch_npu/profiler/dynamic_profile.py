# TEST DOUBLE for the NPU dry run: a recording stand-in for torch_npu.profiler.dynamic_profile; never used outside tests.
"""``init(path)`` / ``step()`` as torch_npu implements them (PTA-DYNAMIC; PROF_CONFIG_PATH).

- ``init(path)``: a symbolic link is refused (recorded, nothing watched); else the folder gets the
  documented template ``profiler_config.json`` (when none is there) and is watched from now on. The
  whole second of init is kept (``_dynamic_profiler_monitor.py``: ``self._cur_time = int(time.time())``).
- The watcher looks at the file every ``NPU_DRYRUN_POLL_S`` seconds (default 2, torch_npu's poll
  interval), at a step: a change is a new whole-second mtime (``int(os.path.getmtime(...))``), and it
  counts only when that second is later than init's (or than the last change taken); an edit in the
  second of init is never seen.
- ``start_step`` as the torch_npu release ``NPU_DRYRUN_PTA_VERSION`` (default 7.2.0) reads it
  (``_dynamic_profiler_config_context.py``): from 7.2.0, -1 starts at the next step and any value
  below -1 becomes 0; before 7.2.0 any value below 0 becomes 0. Then a collection starts at the step
  whose number equals ``start_step`` (``dynamic_profile.py`` ``step``): 0 never, a step already past never.
- A collection runs ``profile(schedule=schedule(wait=0, warmup=<warmup>, active=<active>, repeat=1),
  on_trace_ready=tensorboard_trace_handler(<prof_dir>), ...)`` for warmup + active steps, so
  ``<prof_dir>/*_ascend_pt/`` is written as by mode 04's profiler. A change made during a
  collection is taken up after it ends.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import npu_dryrun_record as rec

from torch_npu import profiler as _profiler

CONFIG_FILE = "profiler_config.json"
TEMPLATE = {  # the default file torch_npu writes (dynamic_profile guide, "profiler_config.json")
    "activities": ["CPU", "NPU"],
    "prof_dir": "./",
    "analyse": False,
    "record_shapes": False,
    "profile_memory": False,
    "with_stack": False,
    "with_flops": False,
    "with_modules": False,
    "active": 1,
    "warmup": 0,
    "start_step": 0,
    "is_rank": False,
    "rank_list": [],
    "experimental_config": {
        "profiler_level": "Level0",
        "aic_metrics": "AiCoreNone",
        "l2_cache": False,
        "op_attr": False,
        "gc_detect_threshold": None,
        "data_simplification": True,
        "record_op_args": False,
        "export_type": ["text"],
        "mstx": False,
        "mstx_domain_include": [],
        "mstx_domain_exclude": [],
        "host_sys": [],
        "sys_io": False,
        "sys_interconnection": False,
    },
}
_state = {
    "path": None,
    "file_s": None,
    "taken_s": None,
    "polled": 0.0,
    "step": 0,
    "prof": None,
    "left": 0,
    "pending": None,
}
INSTANT_FROM = (7, 2)  # the first torch_npu release whose start_step -1 means "the next step" (PTA-DYNAMIC)


def release() -> tuple[int, ...]:
    """The torch_npu release this stand-in poses as (``NPU_DRYRUN_PTA_VERSION``, e.g. 7.1.0)."""
    return tuple(int(p) for p in os.environ.get("NPU_DRYRUN_PTA_VERSION", "7.2.0").split(".")[:2])


def start_step_of(cfg: dict) -> int:
    """``start_step`` as ConfigContext keeps it: not an int, or below the lowest value the release knows, is 0."""
    value = cfg.get("start_step", 0)
    lowest = -1 if release() >= INSTANT_FROM else 0
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= lowest else 0


def init(path: str, via: str = "dynamic_profile.init") -> None:
    folder = Path(path)
    if folder.is_symlink():
        rec.record("torch_npu", "dynamic_profile.init", [str(path)], rc=1, refused="symbolic link", via=via)
        print(f"[ERROR] The path '{path}' is invalid, and profiler will not be enabled.")
        return
    if _state["path"] is not None:
        return  # "Init dynamic profiling repeatedly": the first init wins
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / CONFIG_FILE
    if not config.is_file():
        config.write_text(json.dumps(TEMPLATE, indent=4) + "\n", encoding="utf-8")
    _state.update(
        path=folder.resolve(), file_s=int(os.path.getmtime(config)), taken_s=int(time.time()), polled=time.monotonic()
    )
    rec.record("torch_npu", "dynamic_profile.init", [str(path)], rc=0, via=via, release=".".join(map(str, release())))


def _changed() -> dict | None:
    if time.monotonic() - _state["polled"] < float(os.environ.get("NPU_DRYRUN_POLL_S", "2")):
        return None
    _state["polled"] = time.monotonic()
    config = _state["path"] / CONFIG_FILE
    try:
        file_s = int(os.path.getmtime(config))
        if file_s == _state["file_s"]:
            return None
        _state["file_s"] = file_s
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # half-written or gone: looked at again at the next poll
    if file_s <= _state["taken_s"]:  # not later than init (or the last change taken): dropped
        rec.record("torch_npu", "dynamic_profile.unseen", [file_s, _state["taken_s"]], rc=0, at_step=_state["step"])
        return None
    _state["taken_s"] = file_s
    return data


def _start(cfg: dict) -> None:
    exp = cfg.get("experimental_config") or {}
    config = _profiler._ExperimentalConfig(
        profiler_level=getattr(_profiler.ProfilerLevel, exp.get("profiler_level", "Level0")),
        aic_metrics=getattr(_profiler.AiCMetrics, exp.get("aic_metrics", "AiCoreNone")),
        data_simplification=exp.get("data_simplification", True),
    )
    warmup, active = int(cfg.get("warmup", 0)), int(cfg.get("active", 1))
    rec.record("torch_npu", "dynamic_profile.collect", [cfg], rc=0, at_step=_state["step"])
    prof = _profiler.profile(
        activities=[getattr(_profiler.ProfilerActivity, a.upper()) for a in cfg.get("activities", ["CPU", "NPU"])],
        schedule=_profiler.schedule(wait=0, warmup=warmup, active=active, repeat=1),
        on_trace_ready=_profiler.tensorboard_trace_handler(cfg.get("prof_dir", "./")),
        record_shapes=cfg.get("record_shapes", False),
        profile_memory=cfg.get("profile_memory", False),
        with_stack=cfg.get("with_stack", False),
        experimental_config=config,
    )
    prof.start()
    _state.update(prof=prof, left=warmup + active)


def step() -> None:
    if _state["path"] is None:
        return
    _state["step"] += 1
    if _state["prof"] is not None:
        _state["prof"].step()
        _state["left"] -= 1
        if _state["left"] == 0:
            _state["prof"].stop()
            _state["prof"] = None
            rec.record("torch_npu", "dynamic_profile.stop", [_state["step"]], rc=0)
        return
    cfg = _changed() or _state["pending"]
    if cfg is None:
        return
    start = start_step_of(cfg)
    _state["pending"] = None
    if start == -1 or start == _state["step"]:
        _start(cfg)
    elif start > _state["step"]:
        _state["pending"] = cfg
    else:
        rec.record("torch_npu", "dynamic_profile.ignored", [cfg.get("start_step"), start], rc=0, at_step=_state["step"])


def start(config_path: str | None = None) -> None:
    rec.record("torch_npu", "dynamic_profile.start", [config_path], rc=1, refused="not implemented by the stand-in")
    raise NotImplementedError("the dry run's torch_npu stand-in has no dynamic_profile.start")
