"""``python -m common.bench loop``: its process log (common/bench/proclog) and its table; the noise harness's reading
of the card command's verdict lines."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import ROOT

from common.bench import loop
from common.collect.launcher import AUTOPROFILE_DIR


def test_every_process_writes_one_line_even_beside_another_chaining_sitecustomize(tmp_path):
    # 01's start-up hook (autoprofile) and the process log both chain to the sitecustomize they hide: together
    # on one PYTHONPATH, in either order, each runs once and neither loops into the other.
    for order in ([AUTOPROFILE_DIR, loop.PROCLOG_DIR], [loop.PROCLOG_DIR, AUTOPROFILE_DIR]):
        log = tmp_path / f"{order[0].name}.jsonl"
        env = {
            "PATH": "/usr/bin:/bin",
            "MSPROF_LAB_PROCLOG": str(log),
            "PYTHONPATH": ":".join([*map(str, order), str(ROOT)]),
        }
        done = subprocess.run(
            [sys.executable, "-c", "import json; print('ran')"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0 and done.stdout == "ran\n" and "sitecustomize" not in done.stderr, done.stderr
        (line,) = log.read_text().splitlines()
        record = json.loads(line)
        assert record["argv"] == ["-c"] and record["ended"] >= record["started"] and record["imports"] == {}


def test_the_table_names_each_process_and_its_imports(tmp_path):
    log = tmp_path / "processes.jsonl"
    rows = [
        {
            "pid": 2,
            "ppid": 1,
            "argv": [str(ROOT / "04_pyTorch/src/model_with_profiler.py"), "0"],
            "started": 101.0,
            "ended": 105.5,
            "imports": {"torch": 2.5, "polars": 0.25},
        },
        {
            "pid": 1,
            "ppid": 0,
            "argv": [str(ROOT / "common/__main__.py"), "agree"],
            "started": 100.0,
            "ended": 100.75,
            "imports": {},
        },
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    processes = loop.read_log(log)
    assert [p.what for p in processes] == ["python -m common agree", "04_pyTorch/src/model_with_profiler.py 0"]
    text = loop.table(processes, 100.0, 2.0)
    assert "04_pyTorch/src/model_with_profiler.py 0" in text and "4.50" in text and "2.50" in text
    assert text.splitlines()[-1].startswith("2 Python processes; 1 imported torch (2.5 s in all;")


def test_the_noise_harness_reads_each_checks_line_and_its_margin() -> None:
    """nox -s noise: a verdict line's name without what changes between runs, and tolerance minus difference."""
    from common.bench import noise

    text = (
        "[PASS] matmul share of forward time agrees (01 vs 04): 01 median 95.7% (IQR 95.6-95.8, n 20); 04 median "
        "93.5% (IQR 93.4-93.7, n 5): difference 2.2 points, tolerance 10.3 points = 10 points allowed + 0.3 "
        "points measured noise (init ops excluded)\n"
        "[FAIL] op time vs Computing (04): per step over 5 steps: ...; off by median 12.5% (largest 13.0%; "
        "tolerance 10%)\n"
        "[PASS] op_statistic agrees with op_summary (PROF_000001_20261205002118_X/mindstudio_profiler_output) [01]: "
        "4 OP Types\nnot a verdict line\n"
    )
    found = noise.verdicts_of(text)
    assert [(status, name) for status, name, _ in found] == [
        ("PASS", "matmul share of forward time agrees (01 vs 04)"),
        ("FAIL", "op time vs Computing (04)"),
        ("PASS", "op_statistic agrees with op_summary (PROF_*) [01]"),
    ]
    assert noise.margin(found[0][2]) == pytest.approx(8.1)
    assert noise.margin(found[1][2]) == pytest.approx(-2.5)  # below zero: the FAIL
    assert noise.margin(found[2][2]) is None
