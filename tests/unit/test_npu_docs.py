"""The NPU commands the READMEs show are the ones the lab's builders make, so docs and code cannot drift.

Each README's command blocks are joined (shell line continuations removed, spaces collapsed) and
must contain the builder's output for the same placeholders; the torch_npu profiler call must name
every argument mode 04 passes, with the same value.
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest
from helpers import ROOT, load_lesson

from common.collect.npu_commands import (
    MSPROF_OP_METRICS_REGION,
    atc_argv,
    atc_om_to_json_argv,
    msprof_argv,
    msprof_op_argv,
)

DEV = "<dev>"
PAGES = ["README.md", "01_cmdline/README.md", "02_api_AscendC/README.md", "03_api_pyAcl/README.md"]
ALL_MODES = "docs/npu_reference.md"  # "What each mode runs on an NPU": every mode's commands on one page


def _code(page: str) -> str:
    """Every fenced block of ``page``, continuations joined and whitespace collapsed."""
    text = (ROOT / page).read_text()
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)
    joined = " ".join(blocks).replace("\\\n", " ")
    return re.sub(r"\s+", " ", joined)


def _shown(argv: list[str]) -> str:
    return " ".join(str(a) for a in argv)


def test_msprof_wrapping_a_program_is_the_builders_command_on_every_page() -> None:
    # The program's own argv differs per mode; what msprof adds in front of it must be the builder's.
    prefix = _shown(msprof_argv("msprof", Path("01_cmdline/prof_out"), ["APP"])[:-1])
    assert prefix in _code(ALL_MODES)
    for page, out in [
        (ALL_MODES, "02_api_AscendC/prof_out"),
        ("02_api_AscendC/README.md", "02_api_AscendC/prof_out"),
        (ALL_MODES, "03_api_pyAcl/prof_out/default"),
    ]:
        assert _shown(msprof_argv("msprof", Path(out), ["APP"])[:-1]) in _code(page), (page, out)


def test_03_lesson_line_is_the_harness_argv_on_both_pages() -> None:
    from common.modes.pyacl import acl_worker

    out = Path("03_api_pyAcl/prof_out/default")
    argv = acl_worker.lesson_argv(
        Path("03_api_pyAcl/model/npu/tiny_mlp_default.om"), out / "inputs.npz", out / "output.npy", device=DEV
    )
    shown = "python3 03_api_pyAcl/src/infer.py " + _shown(argv[2:])
    for page in (ALL_MODES, "03_api_pyAcl/README.md"):
        assert shown in _code(page), page


def test_torchrun_options_are_the_drivers_on_both_pages() -> None:
    from common.modes.pytorch.ddp_torchrun import RANK_PROGRAM, torchrun_argv

    script = RANK_PROGRAM
    argv = [str(a) for a in torchrun_argv(2, 29500, script, [])]
    options = argv[argv.index("torch.distributed.run") : argv.index(str(script.resolve()))]
    shown = _shown(options).replace("29500", "<free port>")
    assert shown in _code(ALL_MODES), ALL_MODES
    assert shown.replace("--nproc-per-node 2", "--nproc-per-node N") in _code("04_pyTorch/README.md")


def test_01_program_selects_its_device_itself() -> None:
    code = _code(ALL_MODES)
    assert f"python3 01_cmdline/src/model.py --device npu:{DEV}" in code
    assert "ASCEND_RT_VISIBLE_DEVICES=" not in code  # never set for a profiled run


def test_msprof_op_lines_are_the_builders() -> None:
    from common.modes.ascendc import add_profile

    app = [
        "02_api_AscendC/build/add_custom_main",
        "--device",
        DEV,
        "--warmup",
        str(add_profile.WARMUP_LAUNCHES),
        "--launches",
        str(add_profile.MEASURED_LAUNCHES),
    ]
    argv = msprof_op_argv(
        "msprof",
        Path("02_api_AscendC/prof_out"),
        app,
        kernel_name="add_custom",
        aic_metrics=MSPROF_OP_METRICS_REGION,
        launch_skip=add_profile.WARMUP_LAUNCHES,
    )
    for page in (ALL_MODES, "02_api_AscendC/README.md"):
        assert _shown(argv) in _code(page), page


def test_atc_lines_are_the_builders() -> None:
    from common.modes.pyacl import variants

    code = _code(ALL_MODES)
    base = atc_argv(
        "atc",
        Path("03_api_pyAcl/model/tiny_mlp.onnx"),
        Path("03_api_pyAcl/model/npu/tiny_mlp_default"),
        "Ascend910B3",
        "x:32,1024",
    )
    assert _shown(base).replace("Ascend910B3", "<soc>") in code  # the README leaves the SoC as a placeholder
    for name in ("fp16-io", "fp32"):
        options = variants.VARIANTS[name].atc_options(["x"])  # TinyMLP: one floating-point input, x
        assert " ".join(options) in code, (name, options)
    om = Path("03_api_pyAcl/model/npu/tiny_mlp_default.om")
    assert _shown(atc_om_to_json_argv("atc", om, om.with_suffix(".json"))) in code


def test_the_torch_npu_profiler_call_shows_every_argument_mode_04_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    recorded: dict = {}

    class Profile:
        def __init__(self, **kwargs) -> None:
            recorded.update(kwargs)

    names = types.SimpleNamespace
    profiler = names(
        ProfilerLevel=names(Level1="Level1"),
        AiCMetrics=names(PipeUtilization="PipeUtilization"),
        ProfilerActivity=names(CPU="CPU", NPU="NPU"),
        profile=Profile,
        _ExperimentalConfig=lambda **kw: ("experimental", kw),
        schedule=lambda **kw: ("schedule", kw),
        tensorboard_trace_handler=lambda path: ("handler", path),
    )
    monkeypatch.setitem(sys.modules, "torch_npu", names(profiler=profiler))
    monkeypatch.setitem(sys.modules, "torch_npu.profiler", profiler)
    lesson = load_lesson("04_pyTorch/src/model_with_profiler.py")
    lesson.npu_profiler(Path("04_pyTorch/prof_out"))
    code = _code(ALL_MODES)
    for key, value in recorded.items():
        if isinstance(value, bool):
            assert f"{key}={value}" in code, key
        else:
            assert f"{key}=" in code, key
    _, config = recorded["experimental_config"]
    for key, value in config.items():
        assert f"{key}=" in code and (not isinstance(value, bool) or f"{key}={value}" in code), key
    _, schedule = recorded["schedule"]
    assert "schedule(" + ", ".join(f"{k}={v}" for k, v in schedule.items()) + ")" in code


def test_the_command_is_msprof_op_and_msopprof_its_executable() -> None:
    """msOpProf's user guide runs the tool as `msprof op`; `msopprof` is the executable behind it, not a newer name."""
    pages = [*PAGES, "docs/npu_reference.md", "common/collect/npu_commands.py"]
    for page in pages:
        text = (ROOT / page).read_text()
        assert not re.search(r"newer documentation (calls|names) it", text), page
    reference = (ROOT / "docs/npu_reference.md").read_text()
    assert "its command is `msprof op <options> <app>`" in reference
    assert "`msopprof` is the executable in the CANN package that `msprof op` runs" in reference
