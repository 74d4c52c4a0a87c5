"""The large-profile generator and the block-wise readers, at small N: same answers as the typed readers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import dir_report

from common.analyze import families
from common.bench import generate
from common.render import directory
from common.formats import chrome_trace, datasets, readers, schema, table, writers
from common.formats.datasets import find_datasets
from common.formats.overlap import overlap_step_times
from common.formats.records import Task


@pytest.fixture(scope="module")
def sliced(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bench")
    generate.write_op_summary(out, 2_500, seed=1, slice_rows=1_000)
    return out


def test_op_summary_slices_named_and_shaped_like_msprof(sliced: Path) -> None:
    (folder,) = sliced.glob("PROF_*/mindstudio_profiler_output")
    names = sorted(p.name for p in folder.iterdir())
    assert names == [f"op_summary_slice_{i}_{generate.TIMESTAMP}.csv" for i in range(3)]
    lines = (folder / names[0]).read_text().splitlines()
    assert lines[0].split(",") == schema.OP_SUMMARY and len(lines) == 1_001
    row = lines[1]
    assert row.startswith("0,4294967295,0,") and "\t," in row  # Device_id, single-op Model ID, TAB after the start
    assert any('"""' in line for line in lines[1:])  # msprof's triple-quoted shapes
    assert any(line.endswith(",".join(["N/A"] * len(schema.PMU_COLUMNS))) for line in lines[1:])  # no PMU: HCCL, AI_CPU


def test_sliced_files_read_as_one_table(sliced: Path) -> None:
    (ds,) = find_datasets(sliced)
    tasks = ds.tasks
    assert len(tasks) == ds.task_count == 2_500
    assert sorted(t.start_us for t in tasks) == [t.start_us for t in tasks]  # slices joined in order
    engine = {(s.op_type, s.core_type): s for s in ds.op_statistic}
    typed = {(s.op_type, s.core_type): s for s in writers.aggregate_op_statistic(tasks)}
    assert engine.keys() == typed.keys()
    for key, s in typed.items():
        assert engine[key].count == s.count
        assert engine[key].total_us == pytest.approx(s.total_us, rel=1e-12)
        assert (engine[key].min_us, engine[key].max_us) == (s.min_us, s.max_us)
    assert families.family_counts_of_types(ds.type_counts) == families.family_counts(tasks)
    by_shape = ds.time_by_op_and_shape()
    assert sum(by_shape.values()) == pytest.approx(sum(t.duration_us for t in tasks), rel=1e-12)


def test_small_blocks_give_the_same_answers(sliced: Path, monkeypatch) -> None:
    (path, *_) = sorted(sliced.rglob("op_summary_slice_*.csv"))
    whole = readers.read_op_summary(path)
    monkeypatch.setattr(table, "BLOCK_BYTES", 4096)  # ~12 rows a block: many cuts, some next to quotes
    assert readers.read_op_summary(path) == whole
    totals = readers.task_totals(path, "op_summary")
    assert int(totals["count"].sum()) == len(whole)


def test_block_cut_never_splits_a_quoted_field(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "op_statistic.csv"
    name = '"Fused,\nOp ""x"" v2"'  # a quoted field with a comma, a newline and escaped quotes
    rows = "".join(f"{name if i == 7 else 'Op' + str(i)},AI_CORE,1,{i}.5,1,1,1,1\n" for i in range(20))
    path.write_text(",".join(schema.OP_STATISTIC[1:]) + "\n" + rows)
    monkeypatch.setattr(table, "BLOCK_BYTES", 64)
    stats = readers.read_op_statistic(path)
    assert len(stats) == 20 and stats[7].op_type == 'Fused,\nOp "x" v2' and stats[19].total_us == 19.5


def test_kernel_details_steps(tmp_path: Path) -> None:
    path = generate.write_kernel_details(tmp_path, 2_100, seed=2, block_rows=1_000)
    lines = path.read_text().splitlines()
    assert lines[0].split(",") == schema.KERNEL_DETAILS and len(lines) == 2_101
    tasks = readers.read_kernel_details(path)
    assert [t.step_id for t in tasks[::1000]] == [1, 2, 3]
    assert readers.op_statistic_from_totals(readers.task_totals(path, "kernel_details"))[0].op_type in {
        "MatMulV2",
        "MatMulV3",
    }


def test_trace_view_per_step_computing_free_match_the_generator(tmp_path: Path, monkeypatch) -> None:
    path, expected = generate.write_trace_view(tmp_path, 12_000, seed=3, block_tasks=2_000)
    events = json.loads(path.read_text())  # plain JSON: any viewer opens it
    assert abs(len(events) - 12_000) < 1_000
    assert {e["args"]["name"] for e in events if e["name"] == "process_name"} == {
        "Python",
        "Ascend Hardware",
        "Overlap Analysis",
    }
    monkeypatch.setattr(chrome_trace, "TRACE_BLOCK_BYTES", 3_000)  # many blocks; cuts inside args get rejoined
    steps = overlap_step_times(readers.read_overlap(path))
    assert [s.step for s in steps] == expected["step"].to_list()
    for s, (computing, free) in zip(steps, expected.select("computing_us", "free_us").iter_rows()):
        assert s.computing_us == pytest.approx(computing, abs=1e-6)
        assert s.free_us == pytest.approx(free, abs=1e-6)
        assert s.device_id == "0" and s.preparing_us == 0.0
    assert readers.read_trace(path)[-1].name == "process_sort_index"


def test_trace_blocks_rejoin_cuts_inside_strings_and_nested_objects(tmp_path: Path, monkeypatch) -> None:
    events = [
        {
            "name": "a},{b",
            "ph": "X",
            "pid": 1,
            "tid": 1,
            "ts": "1.000",
            "dur": 2,
            "args": {"Call stack": "f() }, {g()", "list": [{"x": 1}, {"y": "}, {"}]},
        }
        for _ in range(40)
    ]
    path = writers.write_trace(tmp_path / "trace_view.json", events)
    monkeypatch.setattr(chrome_trace, "TRACE_BLOCK_BYTES", 50)
    got = readers.read_trace(path)
    assert len(got) == 40 and got[-1].args == events[-1]["args"] and got[0].name == "a},{b"


def test_whole_trace_row_without_profiler_steps() -> None:
    import numpy as np

    from common.formats.records import OverlapEvents

    overlap = OverlapEvents(
        kind=np.array([0, 3, 0], dtype=np.int8),
        ts_us=np.array([0.0, 5.0, 7.0]),
        dur_us=np.array([5.0, 2.0, 3.0]),
        labels=["CPU"],
    )
    (row,) = overlap_step_times(overlap)
    assert (row.step, row.computing_us, row.free_us, row.stage_us, row.device_id) == (None, 8.0, 2.0, 10.0, "host")


def test_report_at_scale_stays_aggregate(sliced: Path, monkeypatch) -> None:
    monkeypatch.setattr(datasets, "TASK_RECORDS_MAX", 100)
    monkeypatch.setattr(directory, "TASK_RECORDS_MAX", 100)
    text, *_ = dir_report(sliced)
    assert "skipped: 2,500 tasks" in text
    assert len(text.splitlines()) < 60  # top-N tables and families, never a row per task
    (ds,) = find_datasets(sliced)
    assert "_tasks" not in vars(ds) and "tasks" not in vars(ds)  # no per-task records were built


def test_step_table_lists_the_longest_steps_when_there_are_many(tmp_path: Path) -> None:
    from common.formats.records import StepTime

    steps = [StepTime(i, 10.0 + i, 0, 0, 0, 5.0, 0, 0, 0.0, "0") for i in range(1, 51)]
    out = tmp_path / "x_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    writers.write_step_trace_time(out / "step_trace_time.csv", steps)
    writers.write_kernel_details(out / "kernel_details.csv", [Task("m", "MatMulV2", "AI_CORE", 1.0, 2.0, 0.0, "0")])
    text, *_ = dir_report(tmp_path)
    assert "50 steps: the 10 longest are listed" in text
    steps_table = text[text.index("-- Steps:") :]
    table_lines = [line.split() for line in steps_table.splitlines() if line.split()[:1] and line.split()[0].isdigit()]
    assert [int(t[0]) for t in table_lines if t[-1].endswith("-bound")][:10] == list(range(50, 40, -1))
