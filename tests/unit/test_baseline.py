"""python -m common baseline save|check: a real capture's summary kept under a name, a later run judged against it
as compare judges two runs (exit 1 on a regression beyond the threshold and the noise), bad input one line."""

from __future__ import annotations

import json
import sys

from helpers import FIXTURES, error_lines, run

CAPTURE = FIXTURES / "npu" / "msinsight_torch_npu" / "text_level1" / "rank0_ascend_pt"


def _baseline(*args: str):
    return run([sys.executable, "-m", "common", "baseline", *args])


def test_a_run_checked_against_its_own_baseline_passes_and_against_a_faster_one_fails(tmp_path) -> None:
    store = str(tmp_path / "kept")
    saved = _baseline("save", "main", str(CAPTURE), "--store", store)
    assert saved.returncode == 0, saved.stderr
    assert "baseline main: 1 run(s)" in saved.stdout and (tmp_path / "kept" / "main.json").is_file()
    same = _baseline("check", "main", str(CAPTURE), "--store", store)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "[PASS]" in same.stdout and "baseline main" in same.stdout
    # a baseline twice as fast (every op and step halved): the same capture is now a regression
    path = tmp_path / "kept" / "main.json"
    data = json.loads(path.read_text())
    for r in data["runs"]:
        r["ops"] = [[*k, v / 2] for *k, v in r["ops"]]
        for s in r["steps"]:
            for field in ("computing_us", "free_us", "communication_not_overlapped_us", "stage_us"):
                s[field] = s[field] / 2
    (tmp_path / "kept" / "faster.json").write_text(json.dumps(data))
    slower = _baseline("check", "faster", str(CAPTURE), "--store", store)
    assert slower.returncode == 1 and "[FAIL]" in slower.stdout, slower.stdout[-1500:]


def test_bad_names_missing_baselines_and_overwrites_are_one_line_each(tmp_path) -> None:
    store = str(tmp_path / "kept")
    assert _baseline("save", "main", str(CAPTURE), "--store", store).returncode == 0
    for args, said in (
        (["save", "main", str(CAPTURE)], "exists"),
        (["check", "nope", str(CAPTURE)], "no baseline"),
        (["save", "../up", str(CAPTURE)], "is not letters"),
        (["check", "main", str(CAPTURE), "--threshold", "0"], "--threshold 0"),
    ):
        proc = _baseline(*args, "--store", store)
        assert proc.returncode == 2 and len(error_lines(proc.stderr)) == 1 and said in proc.stderr, proc.stderr
    (tmp_path / "kept" / "broken.json").write_text('{"format": 99, "runs": []}')
    proc = _baseline("check", "broken", str(CAPTURE), "--store", store)
    assert proc.returncode == 2 and "not a baseline this lab wrote" in proc.stderr
    assert _baseline("save", "main", str(CAPTURE), "--store", store, "--replace").returncode == 0
