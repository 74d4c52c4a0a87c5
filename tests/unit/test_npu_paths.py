"""The NPU paths of modes 01 and 04, checked without an NPU: exact argv, environment, profiler config.

These are unit tests of the lab's own code against the documented interfaces; they do not claim
that an NPU ran.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
import torch
from helpers import load_lesson

from common.backend import Backend, select_device

NPU = Backend("npu", "test", "/cann", {"msprof": "/cann/bin/msprof"}, (0, 3))


@pytest.mark.parametrize("bad", ["npu:", "npu:x", "npu:123", "gpu", "npu:3;id", " npu:1"])
def test_cmdline_model_refuses_a_device_that_is_not_a_logical_id(bad: str, monkeypatch, capsys) -> None:
    model = load_lesson("01_cmdline/src/model.py")
    monkeypatch.setattr(sys, "argv", ["model.py", "--device", bad])
    with pytest.raises(SystemExit) as exit_info:
        model.main()
    assert exit_info.value.code == 2
    assert f"--device {bad!r} is not cpu, npu or npu:<logical device id>" in capsys.readouterr().err


def test_cmdline_msprof_argv_and_environment(tmp_path: Path) -> None:
    from common.modes import cmdline

    app = ["/usr/bin/python3", "/lab/01_cmdline/src/model.py", "--device", "npu"]
    argv = cmdline.collect_command(NPU, tmp_path / "prof out", app)
    assert argv == [
        "/cann/bin/msprof",
        f"--output={tmp_path / 'prof out'}",
        "--ascendcl=on",
        "--runtime-api=on",
        "--task-time=on",
        "--task-memory=on",
        "--ai-core=on",
        "--aic-metrics=PipeUtilization",
        "--aicpu=on",
        "--msproftx=on",
        *app,
    ]
    # The program selects the logical device itself (model.py --device npu:3 -> torch.npu.set_device(3));
    # CANN does not support ASCEND_RT_VISIBLE_DEVICES while profiling, so the lab never sets it.
    assert "ASCEND_RT_VISIBLE_DEVICES" not in select_device(NPU, 3)
    portable = Backend("portable", "test")
    assert cmdline.collect_command(portable, tmp_path, app) == ["portable-launcher", *app]


class _Recorder:
    """A stand-in for torch_npu.profiler that records how the lab configures it."""

    def __init__(self) -> None:
        self.calls: dict = {}
        self.steps = 0

    def module(self) -> types.ModuleType:
        recorder = self
        profiler = types.SimpleNamespace(
            ProfilerLevel=types.SimpleNamespace(Level1="Level1"),
            AiCMetrics=types.SimpleNamespace(PipeUtilization="PipeUtilization"),
            ProfilerActivity=types.SimpleNamespace(CPU="CPU", NPU="NPU"),
            _ExperimentalConfig=lambda **kw: ("experimental", kw),
            schedule=lambda **kw: ("schedule", kw),
            tensorboard_trace_handler=lambda path: ("handler", path),
        )

        class Profile:
            def __init__(self, **kw) -> None:
                recorder.calls = kw

            def __enter__(self):
                return self

            def __exit__(self, *exc) -> None:
                return None

            def step(self) -> None:
                recorder.steps += 1

        profiler.profile = Profile
        return types.SimpleNamespace(profiler=profiler)


def test_pytorch_torch_npu_profiler_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = _Recorder()
    monkeypatch.setitem(sys.modules, "torch_npu", recorder.module())
    monkeypatch.setattr(torch, "npu", types.SimpleNamespace(synchronize=lambda: None), raising=False)
    mode = load_lesson("04_pyTorch/src/model_with_profiler.py")
    model, x = torch.nn.Linear(4, 4), torch.ones(2, 4)
    results = mode.profile(mode.make_step(model, (x,), None, train=False), str(tmp_path), npu=True)
    calls = recorder.calls
    assert calls["activities"] == ["CPU", "NPU"]
    assert calls["schedule"] == ("schedule", {"wait": 1, "warmup": 3, "active": 5, "repeat": 1})
    assert calls["on_trace_ready"] == ("handler", str(tmp_path))
    assert calls["with_stack"] is False and calls["record_shapes"] is True
    assert calls["experimental_config"] == (
        "experimental",
        {"profiler_level": "Level1", "aic_metrics": "PipeUtilization", "data_simplification": False},
    )
    # wait 1 + warmup 3 + active 5, one prof.step() each
    assert recorder.steps == len(results) == 9
