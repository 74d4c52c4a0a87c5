# TEST DOUBLE for the NPU dry run: a recording stand-in for torch_npu.profiler.dynamic_profile; never used outside tests.
"""``init(path)`` / ``step()`` as torch_npu documents them (dynamic_profile; PROF_CONFIG_PATH).

- ``init(path)``: a symbolic link is refused (recorded, nothing watched); else the folder gets the
  documented template ``profiler_config.json`` (when none is there) and is watched from now on.
- ``step()``: one step ends. The file is looked at every step (torch_npu polls every 2 s); a new
  modification time is a new configuration. ``start_step`` 0 collects nothing, -1 starts at the next
  step, N starts at step N, a step already past is ignored. A collection runs
  ``profile(schedule=schedule(wait=0, warmup=<warmup>, active=<active>, repeat=1),
  on_trace_ready=tensorboard_trace_handler(<prof_dir>), ...)`` for warmup + active steps, so
  ``<prof_dir>/*_ascend_pt/`` is written as by mode 04's profiler. A change made during a
  collection is taken up after it ends.
"""

from __future__ import annotations

import json
from pathlib import Path

import npu_dryrun_record as rec

from torch_npu import profiler as _profiler

CONFIG_FILE = "profiler_config.json"
TEMPLATE = {  # the default file torch_npu writes (dynamic_profile guide, "profiler_config.json")
    "activities": ["CPU", "NPU"], "prof_dir": "./", "analyse": False, "record_shapes": False,
    "profile_memory": False, "with_stack": False, "with_flops": False, "with_modules": False, "active": 1,
    "warmup": 0, "start_step": 0, "is_rank": False, "rank_list": [],
    "experimental_config": {"profiler_level": "Level0", "aic_metrics": "AiCoreNone", "l2_cache": False,
                            "op_attr": False, "gc_detect_threshold": None, "data_simplification": True,
                            "record_op_args": False, "export_type": ["text"], "mstx": False,
                            "mstx_domain_include": [], "mstx_domain_exclude": [], "host_sys": [], "sys_io": False,
                            "sys_interconnection": False},
}
_state = {"path": None, "mtime": None, "step": 0, "prof": None, "left": 0, "pending": None}


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
    _state.update(path=folder.resolve(), mtime=config.stat().st_mtime_ns)
    rec.record("torch_npu", "dynamic_profile.init", [str(path)], rc=0, via=via)


def _changed() -> dict | None:
    config = _state["path"] / CONFIG_FILE
    try:
        mtime = config.stat().st_mtime_ns
        if mtime == _state["mtime"]:
            return None
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # half-written or gone: looked at again next step
    _state["mtime"] = mtime
    return data


def _start(cfg: dict) -> None:
    exp = cfg.get("experimental_config") or {}
    config = _profiler._ExperimentalConfig(
        profiler_level=getattr(_profiler.ProfilerLevel, exp.get("profiler_level", "Level0")),
        aic_metrics=getattr(_profiler.AiCMetrics, exp.get("aic_metrics", "AiCoreNone")),
        data_simplification=exp.get("data_simplification", True))
    warmup, active = int(cfg.get("warmup", 0)), int(cfg.get("active", 1))
    rec.record("torch_npu", "dynamic_profile.collect", [cfg], rc=0, at_step=_state["step"])
    prof = _profiler.profile(
        activities=[getattr(_profiler.ProfilerActivity, a.upper()) for a in cfg.get("activities", ["CPU", "NPU"])],
        schedule=_profiler.schedule(wait=0, warmup=warmup, active=active, repeat=1),
        on_trace_ready=_profiler.tensorboard_trace_handler(cfg.get("prof_dir", "./")),
        record_shapes=cfg.get("record_shapes", False), profile_memory=cfg.get("profile_memory", False),
        with_stack=cfg.get("with_stack", False), experimental_config=config)
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
    start = cfg.get("start_step", 0)
    _state["pending"] = None
    if start == -1 or start == _state["step"]:
        _start(cfg)
    elif isinstance(start, int) and start > _state["step"]:
        _state["pending"] = cfg
    else:
        rec.record("torch_npu", "dynamic_profile.ignored", [start], rc=0, at_step=_state["step"])


def start(config_path: str | None = None) -> None:
    rec.record("torch_npu", "dynamic_profile.start", [config_path], rc=1, refused="not implemented by the stand-in")
    raise NotImplementedError("the dry run's torch_npu stand-in has no dynamic_profile.start")
