"""The fast paths (multi-threaded CSV totals, the trace byte scanner, per-step sums) against the exact readers."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.bench import generate
from common.errors import LabError
from common.formats import chrome_trace, overlap, readers, schema, table, trace_scan, writers
from common.formats.records import OverlapEvents, StepTime

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _exact(path: Path, kind: str):
    names = readers._OP_SUMMARY_NAMES if kind == "op_summary" else readers._KERNEL_NAMES
    return readers.exact_task_totals(table.CsvFile(path, "test"), names)


def _same_totals(fast, exact) -> None:
    keys = readers.TOTALS_KEYS
    fast, exact = fast.sort(keys, nulls_last=True), exact.sort(keys, nulls_last=True)
    assert fast.select(keys).equals(exact.select(keys))
    assert fast["count"].to_list() == exact["count"].to_list()
    assert fast["min_us"].to_list() == exact["min_us"].to_list()
    assert fast["max_us"].to_list() == exact["max_us"].to_list()
    for a, b in zip(fast["total_us"], exact["total_us"]):
        assert a == pytest.approx(b, rel=1e-12)


@pytest.mark.parametrize("block", [4096, 1 << 20])
def test_fast_csv_totals_equal_the_exact_reader(tmp_path: Path, monkeypatch, block: int) -> None:
    (path,) = generate.write_op_summary(tmp_path, 3_000, seed=5)
    monkeypatch.setattr(readers, "FAST_BLOCK_BYTES", block)  # many blocks: cuts next to triple quotes
    fast = readers._fast_totals(table.CsvFile(path, "test"), readers._OP_SUMMARY_NAMES)
    assert fast is not None and int(fast["count"].sum()) == 3_000
    _same_totals(fast, _exact(path, "op_summary"))


@pytest.mark.parametrize("column", ["Device_id", "OP Type", "Input Shapes", "cube_utilization(%)"])
def test_a_block_cut_inside_a_quoted_field_never_gives_wrong_totals(tmp_path: Path, monkeypatch, column: str) -> None:
    """Blocks are cut after any newline, quoted or not: a cut inside a quoted field must make the pass give up."""
    header = schema.OP_SUMMARY
    row = dict.fromkeys(header, "0")
    lines = []
    for i in range(60):
        cells = {**row, "Op Name": f"op{i}", "OP Type": "Add", "Task Type": "AI_CORE", "Task Duration(us)": f"{i}.5"}
        if i % 7 == 0:
            cells[column] = '"two\nlines, ""quoted"""'
        lines.append(",".join(cells[c] for c in header))
    path = tmp_path / "op_summary_20260101000000.csv"
    path.write_text(",".join(header) + "\n" + "\n".join(lines) + "\n")
    exact = _exact(path, "op_summary")
    assert int(exact["count"].sum()) == 60
    key = {"Device_id": "device_id", "OP Type": "op_type", "Input Shapes": "input_shapes"}.get(column)
    assert key is None or any(v.startswith("two\nlines, ") for v in exact[key])
    whole = readers._fast_totals(table.CsvFile(path, "test"), readers._OP_SUMMARY_NAMES)
    assert whole is not None  # one block: quoted newlines are no reason to give up
    _same_totals(whole, exact)
    gave_up = 0
    for block in range(150, 600, 13):  # cuts at every kind of place, inside the quoted fields included
        monkeypatch.setattr(readers, "FAST_BLOCK_BYTES", block)
        fast = readers._fast_totals(table.CsvFile(path, "test"), readers._OP_SUMMARY_NAMES)
        if fast is None:
            gave_up += 1
        else:
            _same_totals(fast, exact)
        readers._TOTALS_CACHE.clear()
        _same_totals(readers.task_totals(path, "op_summary"), exact)
    assert gave_up  # some cuts did land inside a quoted field


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda cells: cells[:-3], "fields where the header has"),  # a short row
        (lambda cells: [*cells, "extra"], "fields where the header has"),  # a long row
        (lambda cells: [c if i != 9 else "N/A" for i, c in enumerate(cells)], "'Task Duration(us)' is empty"),
        (lambda cells: [c if i != 9 else "-1.0" for i, c in enumerate(cells)], "below 0"),
        (lambda cells: [c if i != 9 else "nan" for i, c in enumerate(cells)], "not a number"),
        (lambda cells: [c if i != 9 else "12us" for i, c in enumerate(cells)], "not a number"),
    ],
)
def test_a_bad_row_falls_back_to_the_exact_error(tmp_path: Path, monkeypatch, damage, message: str) -> None:
    (path,) = generate.write_op_summary(tmp_path, 500, seed=6)
    monkeypatch.setattr(readers, "FAST_BLOCK_BYTES", 8192)  # the bad row is in a later block: the pass stops early
    lines = path.read_text().splitlines()
    lines[321] = ",".join(damage(lines[321].split(",")))  # no quoted commas before column 10 in generated rows
    path.write_text("\n".join(lines) + "\n")
    assert readers._fast_totals(table.CsvFile(path, "test"), readers._OP_SUMMARY_NAMES) is None
    with pytest.raises(LabError, match=rf"{re.escape(path.name)}:322: .*{re.escape(message)}"):
        readers.task_totals(path, "op_summary")


def test_totals_are_read_once_per_file_and_again_when_it_changes(tmp_path: Path, monkeypatch) -> None:
    (path,) = generate.write_op_summary(tmp_path, 200, seed=7)
    calls = []
    fast = readers._fast_totals
    monkeypatch.setattr(readers, "_fast_totals", lambda *a: calls.append(1) or fast(*a))
    first = readers.task_totals(path, "op_summary")
    assert readers.task_totals(path, "op_summary") is first and len(calls) == 1
    path.write_text("\n".join(path.read_text().splitlines()[:101]) + "\n")  # 100 rows now
    assert int(readers.task_totals(path, "op_summary")["count"].sum()) == 100 and len(calls) == 2


# --- traces -------------------------------------------------------------------------------------------
def _exact_steps(path: Path) -> list[StepTime]:
    return overlap.overlap_step_times(chrome_trace.overlap_events(chrome_trace.iter_trace(path, timed=True), path))


def _scanned_steps(path: Path) -> list[StepTime]:
    blocks = trace_scan.scan_overlap_events(path)
    assert blocks is not None, "the scanner gave up on a trace it should read"
    return overlap.overlap_step_times(chrome_trace.overlap_events(blocks, path))


TRACES = sorted(FIXTURES.rglob("trace_view.json")) + sorted(FIXTURES.glob("npu/*/PROF_*/*/msprof_*.json"))


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.parent.parent.name)
def test_scanner_equals_the_full_decode_on_real_traces(path: Path) -> None:
    assert _scanned_steps(path) == _exact_steps(path)


@pytest.mark.parametrize("window", [2_000, 1 << 20])
def test_scanner_equals_the_full_decode_on_a_generated_trace(tmp_path: Path, monkeypatch, window: int) -> None:
    path, expected = generate.write_trace_view(tmp_path, 15_000, seed=8, block_tasks=2_000)
    monkeypatch.setattr(trace_scan, "SCAN_BLOCK_BYTES", window)
    monkeypatch.setattr(trace_scan, "SCAN_BATCH", 7)  # decoded a few events at a time
    steps = _scanned_steps(path)
    assert steps == _exact_steps(path) and [s.step for s in steps] == expected["step"].to_list()


def test_scanner_gives_up_where_it_cannot_vouch(tmp_path: Path) -> None:
    base = {"ph": "X", "pid": 1, "tid": 1, "ts": "1.0", "dur": 1.0}
    meta = {"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "Overlap Analysis"}}
    # '}, {' inside a string between the event's start and its name: the slice cannot decode
    tricky = writers.write_trace(tmp_path / "a.json", [meta, {"args": {"s": "x}, {y"}, "name": "Computing", **base}])
    assert trace_scan.scan_overlap_events(tricky) is None
    assert readers.read_overlap(tricky).ts_us.tolist() == [1.0]  # the full decode reads it
    truncated = tmp_path / "b.json"
    truncated.write_bytes(writers.write_trace(tmp_path / "c.json", [meta]).read_bytes().rstrip()[:-1])
    assert trace_scan.scan_overlap_events(truncated) is None
    with pytest.raises(LabError, match="closing"):
        readers.read_overlap(truncated)
    text_time = writers.write_trace(tmp_path / "d.json", [meta, {**base, "name": "Free", "ts": "soon"}])
    assert trace_scan.scan_overlap_events(text_time) is None
    with pytest.raises(LabError, match="soon"):
        readers.read_overlap(text_time)


# --- per-step sums ----------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.data())
def test_step_sums_equal_the_mask_computation(data) -> None:
    n = data.draw(st.integers(1, 60))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    ts = np.round(rng.uniform(0, 100, n), 3)
    starts = sorted(data.draw(st.lists(st.sampled_from([0.0, 10.0, 10.0, 33.3, 50.0, 99.0, 150.0]), max_size=5)))
    events = OverlapEvents(
        kind=rng.integers(0, 4, n).astype(np.int8),
        ts_us=ts,
        dur_us=rng.uniform(0, 5, n),
        steps=[(i + 1, s) for i, s in enumerate(starts)],
        bubble_ts_us=np.round(rng.uniform(0, 100, 5), 1),
        bubble_dur_us=rng.uniform(0, 1, 5),
        labels=["NPU 3"],
    )
    fast = overlap.overlap_step_times(events)
    ends = events.ts_us + events.dur_us
    if starts:
        assert fast == overlap._step_times_by_mask(events, "3", ends)
    else:
        assert (
            len(fast) == 1
            and fast[0].step is None
            and fast[0].computing_us == pytest.approx(float(events.dur_us[events.kind == 0].sum()), abs=0)
            and not math.isnan(fast[0].stage_us)
        )


def test_fast_csv_block_smaller_than_a_record(tmp_path: Path, monkeypatch) -> None:
    (path,) = generate.write_op_summary(tmp_path, 50, seed=9)
    monkeypatch.setattr(readers, "FAST_BLOCK_BYTES", 64)  # every record is longer than a block
    file = table.CsvFile(path, "test")
    chunks = list(file.large_chunks(64))
    assert b"".join(c for _, c in chunks) == path.read_bytes()[file.data_offset :]
    _same_totals(readers._fast_totals(file, readers._OP_SUMMARY_NAMES), _exact(path, "op_summary"))
