"""nox -s fix, a representative slice: the host-bound pair (its verdict must change), the graph pair (03's
lesson under ONNX Runtime) and the kernel's tiling pair (02's CMake project built twice for the twin), each
measured twice a side, interleaved, read back through the lab's conversions."""

from __future__ import annotations

import json
import sys

import pytest
from helpers import ROOT, error_lines, remove_lab_output, run

SCHEMA = {
    "finding",
    "fix",
    "mode",
    "metric",
    "unit",
    "before",
    "after",
    "gain_pct",
    "beyond_noise",
    "verdict_before",
    "verdict_after",
    "precision",
    "npu_only",
}


@pytest.fixture(scope="module")
def fixed():
    proc = run(
        [sys.executable, "-m", "common.modes.fix", "--pairs", "batch,graph-optimization,tiles", "--repeat", "2"],
        timeout=600,
    )
    yield proc, json.loads((ROOT / "fix_out" / "fix.json").read_text()) if proc.returncode == 0 else None
    remove_lab_output(ROOT / "fix_out")


def test_the_run_writes_every_pair_with_the_schema_and_the_npu_only_ones_listed(fixed) -> None:
    proc, result = fixed
    assert proc.returncode == 0, proc.stderr[-2000:]
    pairs = {p["name"]: p for p in result["pairs"]}
    assert all(SCHEMA <= set(p) for p in pairs.values())
    run_here = [p for p in pairs.values() if not p["npu_only"]]
    assert {p["name"] for p in run_here} == {"batch", "graph-optimization", "tiles"}
    for p in run_here:
        for side in ("before", "after"):
            s = p[side]
            assert s["n"] == 2 and s["min"] <= s["median"] <= s["max"]
        assert p["gain_pct"] == pytest.approx(
            100 * (p["before"]["median"] - p["after"]["median"]) / p["before"]["median"]
        )
    npu = [p for p in pairs.values() if p["npu_only"]]
    assert {"double-buffer", "task-queue", "cpu-affinity", "binary-operators", "hf32", "aoe"} <= {
        p["name"] for p in npu
    }
    assert all(p["answer"] == "needs an NPU" and p["before"] is None and "http" in p["source"] for p in npu)
    for name in ("fix.md", "report.html"):
        assert (ROOT / "fix_out" / name).is_file()


def test_the_host_bound_finding_is_the_baselines_own_verdict_and_a_larger_batch_changes_it(fixed) -> None:
    _, result = fixed
    batch = next(p for p in result["pairs"] if p["name"] == "batch")
    assert batch["verdict_before"].startswith("host-bound") and batch["finding"] == batch["verdict_before"]
    # batch 1 -> 32 at hidden 64: per sample the step is many times shorter (31x in the sweep); half is far inside
    assert batch["after"]["median"] < 0.5 * batch["before"]["median"] and batch["beyond_noise"]
    assert batch["precision"] is None  # more samples compute the same per sample: nothing to re-check
    graph = next(p for p in result["pairs"] if p["name"] == "graph-optimization")
    assert graph["precision"]["ok"] and graph["precision"]["max_abs_diff"] <= graph["precision"]["tolerance"]
    assert "nodes per execute" in graph["verdict_before"]


def test_fewer_larger_tiles_shrink_the_kernels_scalar_part(fixed) -> None:
    """The twin's own timers: the share outside vec / mte2 / mte3 (the per-tile loop and queues) falls with the tile
    count; each side's binary said which tiling it was built with."""
    import re

    _, result = fixed
    tiles = next(p for p in result["pairs"] if p["name"] == "tiles")
    share = [float(re.match(r"scalar (\d+)%", tiles[k])[1]) for k in ("verdict_before", "verdict_after")]
    assert share[1] < share[0], (tiles["verdict_before"], tiles["verdict_after"])
    assert "8 x 2 tiles of 64" in tiles["verdict_before"] and "2 x 2 tiles of 256" in tiles["verdict_after"]
    assert tiles["precision"] is None and "modelled" in tiles["note"]


def test_bad_options_are_one_line_each() -> None:
    for args, said in ((["--repeat", "0"], "--repeat '0'"), (["--pairs", "nope"], "no pair named nope")):
        proc = run([sys.executable, "-m", "common.modes.fix", *args])
        assert proc.returncode == 2 and len(error_lines(proc.stderr)) == 1 and said in proc.stderr, proc.stderr
