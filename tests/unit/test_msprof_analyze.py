"""The lab's side of the msprof-analyze check, in process: Overlap Analysis totals of a real trace, the tolerance.

The check itself, with msprof-analyze installed and run, is tests/modes/test_ecosystem.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import FIXTURES

from common.collect import msprof_analyze
from common.formats import overlap, readers
from common.formats.datasets import find_datasets

REAL = FIXTURES / "npu" / "torch_npu_trace_view"
REAL_TRACE = REAL / "localhost_437675_20240102021151000_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"


def test_overlap_totals_of_a_real_torch_npu_trace() -> None:
    # Sums of the fixture's 10 Computing and 10 Free events (NPU, no communication).
    row = overlap.overlap_step_time(readers.read_trace(REAL_TRACE))
    assert row.computing_us == pytest.approx(17.9195, abs=1e-9)
    assert row.free_us == pytest.approx(1163.5885, abs=1e-9)
    assert (row.communication_us, row.communication_not_overlapped_us, row.bubble_us) == (0.0, 0.0, 0.0)
    assert row.stage_us == pytest.approx(1181.507, abs=0.5)  # first to last event; ts has ~0.25 us float steps
    assert row.step is None and row.preparing_us is None and row.device_id is None  # label "NPU": no number


def test_report_recomputes_steps_from_trace_view_when_step_trace_time_is_absent() -> None:
    (ds,) = find_datasets(REAL)
    assert not ds.has("step_trace_time")
    assert [(s.computing_us, s.free_us) for s in ds.steps] == [pytest.approx((17.9195, 1163.5885))]
    assert ds.steps_source.startswith("trace_view.json Overlap Analysis")


def test_no_overlap_process_gives_no_step_row(tmp_path: Path) -> None:
    trace = tmp_path / "trace_view.json"
    trace.write_text('[{"ph": "X", "name": "Computing", "pid": 1, "tid": 0, "ts": "10.0", "dur": 5.0}]')
    assert overlap.overlap_step_time(readers.read_trace(trace)) is None  # no process_name "Overlap Analysis"


@pytest.mark.parametrize(
    ("lab", "tool", "ok"),
    [
        (100.0, 100.99, True),
        (100.0, 101.01, False),
        (100.0, 98.9, False),
        (0.0179, 0.018, True),
        (0.0179, 0.019, False),  # below 0.05 ms: half of advisor's 0.001 ms print step
    ],
)
def test_agreement_tolerance(lab: float, tool: float, ok: bool) -> None:
    assert msprof_analyze.check_agreement("Free", lab, tool, "x").ok is ok
