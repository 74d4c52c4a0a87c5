"""What a copied lesson writes off the NPU, read as a capture (common/cli/captures.py): which files are taken for
what, the ranks of several torch.profiler traces, and the one-line refusals when they are not one run's."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import error_lines, run


def trace(rank: int | None, world: int | None = 2, ms: float = 2.0) -> dict:
    """A torch.profiler trace of two steps, each one aten::mm of ``ms`` milliseconds."""
    events = []
    for step in (1, 2):
        ts = step * 10_000.0
        events += [
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{step}",
                "ts": ts,
                "dur": 9_000.0,
                "pid": 1,
                "tid": 1,
            },
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::mm",
                "ts": ts + 10,
                "dur": ms * 1000,
                "pid": 1,
                "tid": 1,
                "args": {"Input Dims": [[8, 8], [8, 8]], "Input type": ["float", "float"]},
            },
        ]
    doc = {"traceEvents": events, "baseTimeNanoseconds": 1_700_000_000_000_000_000}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "gloo", "rank": rank, "world_size": world}
    return doc


def write(folder: Path, name: str, doc) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(doc))
    return folder / name


def lab(*args: str):
    return run([sys.executable, "-m", "common", *map(str, args)])


def test_ranks_are_read_from_distributed_info_whatever_the_files_are_called(tmp_path: Path) -> None:
    write(tmp_path, "host_a_123.1.pt.trace.json", trace(1, ms=8.0))
    write(tmp_path, "host_b_456.2.pt.trace.json", trace(0, ms=2.0))
    proc = lab("cluster", tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    table = proc.stdout.split("-- Per rank, median of the steps (us) --", 1)[1]
    computing = {row.split()[0]: row.split()[1] for row in table.splitlines() if row[:4].strip().isdigit()}
    assert computing == {"0": "2,000.0", "1": "8,000.0"}  # each rank's own trace, by its distributedInfo


@pytest.mark.parametrize(
    "docs, message",
    [
        (
            {"a.1.pt.trace.json": trace(None), "b.2.pt.trace.json": trace(None)},
            "holds 2 torch.profiler traces and a.1.pt.trace.json names no rank",
        ),
        ({"a.1.pt.trace.json": trace(0), "b.2.pt.trace.json": trace(0)}, "rank 0 has two traces"),
        (
            {"a.1.pt.trace.json": trace(0, world=4), "b.2.pt.trace.json": trace(1, world=4)},
            "rank(s) 2, 3 of 4 have no trace",
        ),
        (
            {"a.1.pt.trace.json": trace(0, world=2), "b.2.pt.trace.json": trace(1, world=3)},
            "the traces name world sizes [2, 3]",
        ),
    ],
)
def test_traces_that_are_not_the_ranks_of_one_run_are_refused_in_one_line(
    tmp_path: Path, docs: dict, message: str
) -> None:
    for name, doc in docs.items():
        write(tmp_path, name, doc)
    for command in ("cluster", "report"):
        proc = lab(command, tmp_path)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert len(error_lines(proc.stderr)) == 1 and message in proc.stderr, proc.stderr


def test_a_named_rank_in_the_file_name_is_enough(tmp_path: Path) -> None:
    write(tmp_path, "vm_rank0.1.pt.trace.json", trace(None))
    write(tmp_path, "vm_rank1.2.pt.trace.json", trace(None, ms=3.0))
    proc = lab("compare", tmp_path, tmp_path, "--json")
    assert proc.returncode == 0, proc.stderr
    assert [r["rank"] for r in json.loads(proc.stdout)["steps"]["per_rank"]] == [0, 1]


def test_an_ort_profile_and_a_twin_csv_are_read_by_name_and_header(tmp_path: Path) -> None:
    runs = [{"ph": "X", "cat": "Session", "name": "model_run", "ts": 100.0 * i, "dur": 50.0} for i in range(3)]
    nodes = [
        {
            "ph": "X",
            "cat": "Node",
            "name": "mm_kernel_time",
            "ts": 100.0 * i + 10,
            "dur": 7.0 + i,
            "args": {"op_name": "MatMul", "input_type_shape": [{"float": [4, 4]}, {"float": [4, 4]}]},
        }
        for i in range(3)
    ]
    write(tmp_path / "ort", "onnxruntime_profile_x.json", runs + nodes)
    proc = lab("compare", tmp_path / "ort", tmp_path / "ort", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["total"]["baseline_us"] == pytest.approx(8.0 + 9.0)  # runs 2 and 3
    (tmp_path / "twin").mkdir()
    (tmp_path / "twin" / "t.csv").write_text(
        "launch,block,start_unix_ns,wall_ns,kernel_ns,region_ns,mte2_ns,vec_ns,"
        "mte3_ns\n" + "".join(f"{i},{b},{i}000,{5000 + i},4000,0,1000,2000,500\n" for i in range(2) for b in range(2))
    )
    proc = lab("compare", tmp_path / "twin", tmp_path / "twin" / "t.csv", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["total"]["baseline_us"] == pytest.approx(5.001)  # launch 1's wall time


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("onnxruntime_profile_1.json", "[", "cannot read the ONNX Runtime profile"),
        ("onnxruntime_profile_1.json", "[]", "no model_run event"),
        ("t.csv", "launch,block,start_unix_ns,wall_ns,kernel_ns\n", "a twin timings CSV with no launch"),
        ("t.csv", "launch,block,start_unix_ns,wall_ns,x\n0,0,1,2,3\n", "not a twin timings CSV"),
    ],
)
def test_a_damaged_profile_is_one_line(tmp_path: Path, name: str, text: str, message: str) -> None:
    (tmp_path / name).write_text(text)
    proc = lab("report", tmp_path)
    assert proc.returncode == 2 and len(error_lines(proc.stderr)) == 1 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_baseline_of_rank_traces_keeps_each_ranks_steps(tmp_path: Path) -> None:
    write(tmp_path / "run", "vm_rank0.1.pt.trace.json", trace(0))
    write(tmp_path / "run", "vm_rank1.2.pt.trace.json", trace(1, ms=4.0))
    saved = lab("baseline", "save", "ddp", tmp_path / "run", "--store", tmp_path / "kept")
    assert saved.returncode == 0, saved.stderr
    kept = json.loads((tmp_path / "kept" / "ddp.json").read_text())["runs"][0]["rank_steps"]
    assert sorted(kept) == ["0", "1"] and all(len(rows) == 2 for rows in kept.values())
    checked = lab("baseline", "check", "ddp", tmp_path / "run", "--store", tmp_path / "kept")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "per rank (2 ranks: 0 gain, 2 within noise, 0 regression)" in checked.stdout
