"""Mode 02's pyasc kernel: the lesson on the pyasc twin, the twin's rules and fp16, the kernel verdict, run.sh."""

from __future__ import annotations

import csv
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from common.analyze.bounds.op import Peaks
from common.analyze.bounds.kernel import KernelFacts, classify_kernel
from common.modes.ascendc import pyasc_twin
from common.modes.ascendc.pyasc_profile import pyasc_twin_verdict
from common.modes.ascendc.pyasc_profile import twin_env

from helpers import ROOT, lab_env

SRC = ROOT / "02_api_AscendC" / "src"


@pytest.fixture
def twin():
    """The twin installed as ``asc`` for one test, then removed again (other tests must not see it)."""
    asc = pyasc_twin.install()
    yield asc
    for name in [n for n in sys.modules if n == "asc" or n.startswith("asc.") or n.startswith("lesson_copy")]:
        del sys.modules[name]
    sys.path.remove(str(pyasc_twin.SITE))


def _UNCHANGED(text: str) -> str:
    return text


def load_copy(tmp_path: Path, name: str, edit=_UNCHANGED):
    """A copy of add_pyasc.py, edited, imported under its own name (the twin must be installed)."""
    path, text = tmp_path / f"{name}.py", (SRC / "add_pyasc.py").read_text()
    edited = edit(text)
    assert edited != text or edit is _UNCHANGED, f"{name}: the edit changed nothing (the lesson's text moved?)"
    path.write_text(edited)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_lesson_kernel_verifies_on_the_twin(twin, tmp_path):
    lesson = load_copy(tmp_path, "lesson_copy_add")
    x, y = lesson.make_inputs()
    z = lesson.launch(x, y)
    assert lesson.mismatches(x, y, z, max_ulp=0) == []
    rows = twin._twin.take_rows()
    assert [r["block"] for r in rows] == list(range(lesson.USE_CORE_NUM))
    assert all(r["mte2_ns"] > 0 and r["vec_ns"] > 0 and r["mte3_ns"] > 0 and r["region_ns"] > 0 for r in rows)
    assert all(r["kernel_ns"] >= r["region_ns"] >= r["mte2_ns"] + r["vec_ns"] + r["mte3_ns"] for r in rows)


def test_a_sub_kernel_fails_verification(twin, tmp_path):
    lesson = load_copy(tmp_path, "lesson_copy_sub", lambda text: text.replace("asc.add(", "asc.sub("))
    x, y = lesson.make_inputs()
    bad = lesson.mismatches(x, y, lesson.launch(x, y), max_ulp=0)
    assert len(bad) > lesson.TOTAL_LENGTH * 0.99  # x - y differs from x + y almost everywhere
    index, want, got = bad[0]
    assert want == float(x[index] + y[index]) and got == float(x[index] - y[index])


def test_missing_wait_flag_names_the_line_that_reads(twin, tmp_path):
    lesson = load_copy(
        tmp_path,
        "lesson_copy_nowait",
        lambda text: text.replace("        asc.wait_flag(asc.HardEvent.MTE2_V, slot)\n", ""),
    )
    with pytest.raises(twin._twin.TwinError) as err:
        lesson.launch(*lesson.make_inputs())
    line = next(
        n
        for n, text in enumerate((tmp_path / "lesson_copy_nowait.py").read_text().splitlines(), 1)
        if "asc.add(" in text
    )
    assert f"add at lesson_copy_nowait.py:{line}: V reads UB bytes" in str(err.value)
    assert "HardEvent.MTE2_V" in str(err.value)


def test_wait_without_set_and_bad_copies_stop(twin, tmp_path):
    no_preset = load_copy(
        tmp_path,
        "lesson_copy_nopreset",
        lambda text: text.replace(
            "        asc.set_flag(asc.HardEvent.MTE3_MTE2, slot)\n\n    asc.metrics_prof_start()",
            "        pass\n\n    asc.metrics_prof_start()",
        ),
    )
    with pytest.raises(twin._twin.TwinError, match="MTE3_MTE2 id 0 was never set"):
        no_preset.launch(*no_preset.make_inputs())
    odd = load_copy(
        tmp_path,
        "lesson_copy_odd",
        lambda text: text.replace(
            "asc.data_copy(x_ub[at:], x_gm[i * tile :], tile)", "asc.data_copy(x_ub[at:], x_gm[i * tile :], tile - 1)"
        ),
    )
    with pytest.raises(twin._twin.TwinError, match="126 bytes, not a whole number of 32-byte blocks"):
        odd.launch(*odd.make_inputs())


def test_twin_fp16_add_is_ieee_round_to_nearest_even(twin):
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 1 << 16, size=(2, 40000), dtype=np.uint16)
    special = np.array([0x0001, 0x8001, 0x03FF, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0x3C00, 0x1400], np.uint16)
    a = np.concatenate([bits[0], np.repeat(special, special.size)]).view(np.float16)
    b = np.concatenate([bits[1], np.tile(special, special.size)]).view(np.float16)
    got = twin._twin.fp16_exact(np.add, a, b)
    with np.errstate(all="ignore"):
        want = a + b  # numpy's fp16 add rounds once from float32, which is wide enough to be exact here
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got.view(np.uint16)[~nan], want.view(np.uint16)[~nan])


def test_twin_never_shadows_a_real_pyasc(monkeypatch):
    monkeypatch.setitem(sys.modules, "asc", type(sys)("asc"))  # an asc that is not the twin
    assert pyasc_twin.real_pyasc_available()
    with pytest.raises(RuntimeError, match="must not shadow"):
        pyasc_twin.install()
    assert str(pyasc_twin.SITE) not in sys.path


def test_lesson_sizes_are_the_cpp_kernels(twin, tmp_path):
    # A copied file is alone, so add_pyasc.py keeps its own sizes: they must be add_kernel.cpp's.
    lesson = load_copy(tmp_path, "lesson_copy_sizes")
    cpp: dict[str, int] = {}  # constexpr int32_t NAME = <integers and earlier names with * and />;
    source = (SRC / "add_kernel.cpp").read_text()
    defaults = {name: int(value) for name, value in re.findall(r"#define (ADD_[A-Z_]+) (\d+)", source)}  # variants
    for name, expression in re.findall(r"constexpr int32_t ([A-Z_]+) = ([^;]+);", source):
        cpp[name] = eval(expression.replace("/", "//"), {"__builtins__": {}}, {**defaults, **cpp})
    assert len(cpp) == 6 and {name: getattr(lesson, name) for name in cpp} == cpp


def test_lesson_runs_as_a_program_and_the_twin_writes_its_timers(tmp_path):
    timings = tmp_path / "timings.csv"
    proc = subprocess.run(
        [sys.executable, str(SRC / "add_pyasc.py"), "--warmup", "1", "--launches", "2"],
        env=twin_env(timings),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "kernel sizes: total_length=8192 block_dim=8 block_length=1024 tile_num=8 buffer_num=2 tile_length=64"
        in proc.stdout
    )
    assert pyasc_twin_verdict(proc.returncode, proc.stdout, 3).ok
    with timings.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(int(r["launch"]), int(r["block"])) for r in rows] == [(k, b) for k in range(3) for b in range(8)]


def test_the_lesson_hands_set_platform_a_platform_member_and_the_twin_takes_nothing_else(twin, tmp_path):
    """pyasc's set_platform reads soc_version.value in versions that take Optional[Platform] (docs/npu_reference.md
    PYASC): ``-r Model -v Ascend910B1`` must arrive as config.Platform.Ascend910B1, as pyasc's examples pass it."""
    from asc.runtime import config

    proc = subprocess.run(
        [sys.executable, str(SRC / "add_pyasc.py"), "-r", "Model", "-v", "Ascend910B1"],
        env=twin_env(tmp_path / "t.csv"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "verified: 8192 of 8192" in proc.stdout, proc.stderr
    with pytest.raises(Exception, match="not a config.Platform member"):
        config.set_platform(config.Backend.Model, "Ascend910B1")
    config.set_platform(config.Backend.Model, config.Platform.Ascend910B3)
    assert config.SELECTED["soc_version"] is config.Platform.Ascend910B3


def test_a_kernel_misuse_in_the_program_is_one_error_line(tmp_path):
    lesson = tmp_path / "add_pyasc.py"
    lesson.write_text(
        (SRC / "add_pyasc.py").read_text().replace("        asc.wait_flag(asc.HardEvent.MTE2_V, slot)\n", "")
    )
    proc = subprocess.run(
        [sys.executable, str(lesson)], env=twin_env(tmp_path / "t.csv"), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("Error: add at add_pyasc.py:") and "HardEvent.MTE2_V" in line
    failed = pyasc_twin_verdict(proc.returncode, proc.stdout, 1)
    assert not failed.ok and "without its 'verified:' line" in failed.detail


def test_a_wrong_sum_fails_the_programs_verification(tmp_path):
    lesson = tmp_path / "add_pyasc.py"
    lesson.write_text((SRC / "add_pyasc.py").read_text().replace("asc.add(", "asc.sub("))
    proc = subprocess.run(
        [sys.executable, str(lesson), "--launches", "2"],
        env=twin_env(tmp_path / "t.csv"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and "mismatch in launch 0 at 0:" in proc.stdout
    assert not pyasc_twin_verdict(proc.returncode, proc.stdout, 2).ok


def test_twin_env_never_hides_a_real_pyasc(monkeypatch, tmp_path):
    monkeypatch.setattr(pyasc_twin, "real_pyasc_available", lambda: True)
    with pytest.raises(Exception, match="never hides a real pyasc"):
        twin_env(tmp_path / "t.csv")
    assert os.environ.get("ASCENDC_TWIN_TIMINGS") is None


# --- the kernel verdict ------------------------------------------------------------------------------
PEAKS = Peaks("test", 1e12, 100e9, "test bandwidth")


def facts(**changes) -> KernelFacts:
    base = dict(
        kernel="k",
        median_us=10.0,
        busy_us=9.0,
        ratios={"vec": 0.3, "scalar": 0.3, "mte2": 0.2, "mte3": 0.1},
        bytes_moved=200_000,
        block_dim=8,
        concurrent_blocks=8,
    )
    return KernelFacts(**{**base, **changes})


@pytest.mark.parametrize(
    "changes, expected",
    [
        ({"busy_us": 2.0}, "launch"),
        ({"ratios": {"vec": 0.3, "scalar": 0.2, "mte2": 0.6, "mte3": 0.3}}, "memory"),
        ({"ratios": {"vec": 0.85, "scalar": 0.1, "mte2": 0.2, "mte3": 0.1}}, "compute"),
        ({"ratios": {"vec": 0.04, "scalar": 0.65, "mte2": 0.03, "mte3": None}}, "stall"),
        # the 910B3 estimate of README: mte2 / vec = 8 > 1, so CANN's indicator calls it memory-bound before stall
        ({"ratios": {"vec": 0.04, "scalar": 0.65, "mte2": 0.33, "mte3": None}}, "memory"),
        (
            {"ratios": {"vec": 0.3, "scalar": 0.2, "mte2": 0.25, "mte3": 0.2}, "median_us": 100.0, "busy_us": 90.0},
            "access pattern",
        ),
        ({}, None),
    ],
)
def test_kernel_verdict_classes(changes, expected):
    verdict = classify_kernel(facts(**changes), PEAKS)
    assert verdict.bottleneck == expected
    assert verdict.lower_bound_us == pytest.approx(1e6 * 200_000 / 100e9)
    assert len(verdict.rules) == 5 and all(rule.source for rule in verdict.rules)


def test_a_kernel_body_longer_than_its_task_is_said_never_a_share_above_100_percent():
    rule = classify_kernel(facts(busy_us=50.0, concurrent_blocks=8), PEAKS).rules[0]
    assert "longer than the 10.0 us task" in rule.evidence and "%" not in rule.evidence.split("longer")[0]


def test_kernel_verdict_waves_and_missing_data():
    # 8 blocks one at a time: 8 x 1.2 us of body fill 96% of a 10 us task, so not launch-bound
    assert classify_kernel(facts(busy_us=1.2, concurrent_blocks=1), PEAKS).rules[0].holds is False
    verdict = classify_kernel(facts(busy_us=None, ratios={}), None)
    assert verdict.bottleneck is None and verdict.lower_bound_us is None
    assert all(rule.holds is None for rule in verdict.rules)
    assert "Lower bound: N/A" in "\n".join(verdict.lines())


# --- run.sh --kernel pyasc, end to end -------------------------------------------------------------
def test_run_sh_kernel_pyasc_prints_median_and_class():
    proc = subprocess.run(
        ["bash", str(ROOT / "02_api_AscendC" / "run.sh"), "0", "--kernel", "pyasc"],
        capture_output=True,
        text=True,
        env=lab_env(),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert re.search(r"^Median kernel time: [\d.]+ us \(over the measured launches\)$", proc.stdout, re.M)
    assert re.search(r"^Bottleneck class: (launch|memory|compute|stall|access pattern) — ", proc.stdout, re.M)
    assert "[PASS] all 8192 elements verified" in proc.stdout
    assert "[PASS] 20 measured launches" in proc.stdout and "[FAIL]" not in proc.stdout
    # one answer, the same in the terminal and in the saved report; never a share above 100%
    (written,) = re.findall(r"^\(written to (.*report\.md)\)$", proc.stdout, re.M)
    report = Path(written).read_text()
    (answer,) = re.findall(r"^Bottleneck class: .*$", proc.stdout, re.M)
    assert answer in report and "This is the answer for this kernel" in answer
    assert "Busiest pipe: " in report and "Bound pipe" not in report
    assert all(float(p) <= 100 for p in re.findall(r"= ([\d.]+)% of the [\d.]+ us task", report))
