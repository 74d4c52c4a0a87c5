"""Memory: the torch_npu memory files read, summarized and reported; the portable backend writes them.

Expected figures are computed here from the files with the csv module, independently of the readers."""

from __future__ import annotations

import csv
import json
import sys
import types
from pathlib import Path

import pytest
import torch
from helpers import FIXTURES, load_lesson, dir_report

from common.analyze.memory import summarize_memory
from common.collect.torch_npu_layout import Allocation, write_memory_files
from common.collect.torch_trace import read_trace
from common.errors import LabError
from common.formats.memory import read_memory, read_memory_record, read_operator_memory

CAPTURE = FIXTURES / "npu" / "msinsight_torch_npu" / "text_level1"
OUT0 = CAPTURE / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _header(path: Path) -> list[str]:
    with path.open(newline="") as f:
        return next(csv.reader(f))


def _peak(rows: list[dict[str, str]], component: str, column: str) -> float:
    return max(float(r[column]) for r in rows if r["Component"] == component and r[column].strip())


def test_peaks_per_allocator_from_memory_record() -> None:
    rows = _rows(OUT0 / "memory_record.csv")
    summary = summarize_memory(read_memory(OUT0))
    peaks = {p.component: p for p in summary.peaks}
    assert set(peaks) == {r["Component"] for r in rows}
    for component in ("PTA", "PTA+GE", "GE"):
        assert peaks[component].peak_allocated_mb == _peak(rows, component, "Total Allocated(MB)")
        assert peaks[component].peak_reserved_mb == _peak(rows, component, "Total Reserved(MB)")
        assert peaks[component].samples == sum(r["Component"] == component for r in rows)
    assert peaks["APP"].peak_allocated_mb is None  # APP rows record reserved memory only
    assert summary.headline.component == "PTA+GE" and summary.process.component == "APP"


def test_top_operators_by_memory_from_operator_memory() -> None:
    totals: dict[str, list[float]] = {}
    for r in _rows(OUT0 / "operator_memory.csv"):
        totals.setdefault(r["Name"], []).append(float(r["Size(KB)"]))
    expected = sorted(totals.items(), key=lambda kv: (-sum(kv[1]), kv[0]))[:10]
    got = summarize_memory(read_memory(OUT0)).operators
    assert [(o.name, o.count) for o in got] == [(name, len(sizes)) for name, sizes in expected]
    assert [o.total_mb for o in got] == pytest.approx([sum(s) / 1024 for _, s in expected])
    assert [o.largest_mb for o in got] == pytest.approx([max(s) / 1024 for _, s in expected])


def test_cann_modules_from_npu_module_mem() -> None:
    peaks: dict[str, float] = {}
    for r in _rows(OUT0 / "npu_module_mem.csv"):
        peaks[r["Component"]] = max(peaks.get(r["Component"], 0.0), float(r["Total Reserved(MB)"]))
    expected = sorted(((k, v) for k, v in peaks.items() if v), key=lambda kv: (-kv[1], kv[0]))[:5]
    assert summarize_memory(read_memory(OUT0)).modules == expected


def test_report_text_and_html_show_the_peaks_and_top_ops() -> None:
    rows = _rows(OUT0 / "memory_record.csv")
    line = (
        f"peak allocated {_peak(rows, 'PTA+GE', 'Total Allocated(MB)'):,.1f} MB, peak reserved "
        f"{_peak(rows, 'PTA+GE', 'Total Reserved(MB)'):,.1f} MB (PTA+GE"
    )
    text, markdown, _, _ = dir_report(CAPTURE, bottlenecks=False)
    assert line in text and line in markdown
    assert "-- Top ops by memory: rank0_ascend_pt/ASCEND_PROFILER_OUTPUT --" in text
    page = dir_report(CAPTURE)[2]
    assert line in page and 'data-chart="memory-peaks"' in page


def test_no_memory_files_no_memory_section(tmp_path: Path) -> None:
    assert not read_memory(tmp_path)
    assert summarize_memory(read_memory(tmp_path)) is None


def test_kb_columns_are_read_as_mb(tmp_path: Path) -> None:
    path = tmp_path / "memory_record.csv"
    path.write_text("Component,Timestamp(us),Total Allocated(KB),Total Reserved(KB),Device\nPTA,10.5,2048,4096,NPU:0\n")
    (row,) = read_memory_record(path)
    assert (row.allocated_mb, row.reserved_mb, row.device) == (2.0, 4.0, "NPU:0")


def test_a_damaged_cell_is_one_line_with_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "operator_memory.csv"
    path.write_text("Name,Size(KB),Allocation Time(us)\naten::mm,12.5,1.0\naten::mm,lots,2.0\n")
    with pytest.raises(LabError, match=r"operator_memory.csv:3: column 'Size\(KB\)' holds 'lots'"):
        read_operator_memory(path)


# --- the portable writer ---------------------------------------------------------------------------
def test_writer_pairs_allocations_with_releases(tmp_path: Path) -> None:
    mb = 1 << 20
    events = [
        Allocation(100.0, 1, 2 * mb, 2 * mb, None, "CPU", "aten::mm"),
        Allocation(150.0, 2, mb, 3 * mb, None, "CPU", None),  # outside any op: record only
        Allocation(200.0, 1, -2 * mb, mb, None, "CPU", None),
        Allocation(250.0, 3, 4 * mb, 5 * mb, None, "CPU", "aten::gelu"),  # never released
    ]
    write_memory_files(tmp_path, events)
    record = read_memory_record(tmp_path / "memory_record.csv")
    assert [(r.component, r.ts_us, r.allocated_mb, r.reserved_mb) for r in record] == [
        ("PTA", 100.0, 2.0, None),
        ("PTA", 150.0, 3.0, None),
        ("PTA", 200.0, 1.0, None),
        ("PTA", 250.0, 5.0, None),
    ]
    ops = read_operator_memory(tmp_path / "operator_memory.csv")
    assert [(o.name, o.size_kb, o.allocation_us, o.release_us, o.duration_us) for o in ops] == [
        ("aten::mm", 2048.0, 100.0, 200.0, 100.0),
        ("aten::gelu", 4096.0, 250.0, None, None),
    ]
    assert _header(tmp_path / "operator_memory.csv") == _header(OUT0 / "operator_memory.csv")  # torch_npu's columns
    assert _header(tmp_path / "memory_record.csv") == _header(OUT0 / "memory_record.csv")
    assert write_memory_files(tmp_path / "none", []) == []


def test_portable_profile_memory_agrees_with_torch_profilers_own_trace(tmp_path: Path) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 64))
    with (
        torch.no_grad(),
        torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof,
    ):
        model(torch.randn(8, 64))
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    events = read_trace(tmp_path / "trace.json").allocations
    trace = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    memory = [e["args"] for e in trace if e.get("name") == "[memory]"]
    assert events and len(events) == len(memory)
    assert sorted(e.nbytes for e in events) == sorted(m["Bytes"] for m in memory)
    write_memory_files(tmp_path, events)
    summary = summarize_memory(read_memory(tmp_path))
    assert summary.headline.peak_allocated_mb == max(m["Total Allocated"] for m in memory) / (1 << 20)
    assert {o.name for o in summary.operators} <= {"aten::addmm", "aten::gelu", "aten::randn", "aten::empty"}


def test_mode_04_profiles_memory_on_both_backends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mode = load_lesson("04_pyTorch/src/model_with_profiler.py")
    assert mode.portable_profiler(str(tmp_path)).profile_memory is True
    seen: dict = {}
    profiler = types.SimpleNamespace(
        ProfilerActivity=types.SimpleNamespace(CPU="CPU", NPU="NPU"),
        ProfilerLevel=types.SimpleNamespace(Level1="Level1"),
        AiCMetrics=types.SimpleNamespace(PipeUtilization="P"),
        _ExperimentalConfig=lambda **kw: kw,
        schedule=lambda **kw: kw,
        tensorboard_trace_handler=lambda d: d,
        profile=lambda **kw: seen.update(kw),
    )
    monkeypatch.setitem(sys.modules, "torch_npu", types.SimpleNamespace(profiler=profiler))
    mode.npu_profiler(tmp_path)
    assert seen["profile_memory"] is True
