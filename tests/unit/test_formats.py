"""Readers on real NPU captures, writers round-trip, and damaged files stop with file/line/column."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import msprof_output

from common.errors import LabError
from common.formats import readers, writers
from common.formats.records import StepTime, Task
from common.formats.schema import KERNEL_DETAILS, OP_SUMMARY, STEP_TRACE_TIME


@pytest.fixture
def cann(npu_fixtures: Path) -> Path:
    return msprof_output(npu_fixtures / "cann85_minimal")


def test_op_summary_real_capture(cann: Path) -> None:
    (path,) = cann.glob("op_summary_*.csv")
    tasks = readers.read_op_summary(path)
    assert len(tasks) == 2
    first = tasks[0]
    assert (first.op_type, first.task_type, first.device_id, first.block_dim) == (
        "sanitized_kernel",
        "MIX_AIC",
        "0",
        256,
    )
    assert first.duration_us == pytest.approx(42399.12)
    assert first.input_shapes is None  # N/A reads as missing
    assert first.pmu["aiv_scalar_ratio"] == pytest.approx(0.995)
    assert tasks[1].wait_us == pytest.approx(2.88)


def test_other_msprof_files_real_capture(cann: Path) -> None:
    (stat,) = readers.read_op_statistic(next(cann.glob("op_statistic_*.csv")))
    assert (stat.count, stat.total_us, stat.ratio_pct) == (2, pytest.approx(84457.60), 100)
    api = readers.read_api_statistic(next(cann.glob("api_statistic_*.csv")))
    assert api[0].level == "runtime" and api[0].count == 27
    tt = readers.read_task_time(next(cann.glob("task_time_*.csv")))
    assert [r.kernel_name for r in tt] == [None, "sanitized_kernel", "sanitized_kernel"]
    events = readers.read_trace(next(cann.glob("msprof_*.json")))
    assert any(e.ph == "X" and e.dur_us for e in events)


def test_kernel_details_old_torch_npu_quirks(npu_fixtures: Path) -> None:
    path = npu_fixtures / "torch_npu_kernel_details/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
    tasks = readers.read_kernel_details(path)
    assert len(tasks) == 29
    first = tasks[0]
    assert first.device_id is None  # older torch_npu: no Device_id column
    assert first.step_id == 19 and first.block_dim == 16
    assert first.start_us == pytest.approx(1736413971558972.912)  # quoted, TAB stripped
    assert first.input_shapes == "81920,4096;8192,512"  # triple quotes stripped
    assert first.pmu["aic_mac_ratio"] == pytest.approx(0.824)


def test_block_num_alias_and_no_device_id(tmp_path: Path) -> None:
    path = tmp_path / "op_summary_20260101000000.csv"
    path.write_text(
        "Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us),Task Duration(us),"
        "Task Wait Time(us),Block Num\n4294967295,1,2,MatMul_1,MatMulV2,dynamic,AI_CORE,100.000\t,5.5,0,24\n"
    )
    (task,) = readers.read_op_summary(path)
    assert task.block_dim == 24 and task.device_id is None and task.start_us == 100.0


def test_op_summary_round_trip_keeps_msprof_quirks(tmp_path: Path) -> None:
    tasks = [
        Task(
            "aten::addmm",
            "aten::addmm",
            "CPU",
            1700000000000000.25,
            12.5,
            0.0,
            "host",
            input_shapes="32,1024;1024,1024",
            input_dtypes="FLOAT;FLOAT",
        )
    ]
    path = writers.write_op_summary(tmp_path / "op_summary_20260101000000.csv", tasks)
    lines = path.read_text().splitlines()
    assert lines[0].split(",") == OP_SUMMARY
    assert "1700000000000000.250\t" in lines[1]  # trailing TAB after timestamps
    assert '"""32,1024;1024,1024"""' in lines[1]  # msprof's triple-quoted shapes
    assert lines[1].count("N/A") >= 20  # every PMU column unmeasured
    (back,) = readers.read_op_summary(path)
    assert (back.op_type, back.start_us, back.duration_us, back.input_shapes) == (
        "aten::addmm",
        1700000000000000.25,
        12.5,
        "32,1024;1024,1024",
    )


def test_kernel_details_and_step_trace_headers(tmp_path: Path) -> None:
    task = Task("g", "aten::gelu", "CPU", 1.0, 2.0, 0.0, "host", step_id=4)
    kd = writers.write_kernel_details(tmp_path / "kernel_details.csv", [task])
    assert kd.read_text().splitlines()[0].split(",") == KERNEL_DETAILS
    assert readers.read_kernel_details(kd)[0].step_id == 4
    step = StepTime(4, 10.0, 0.0, 0.0, 0.0, 5.0, 15.0, 0.0, 1.0, "host")
    st = writers.write_step_trace_time(tmp_path / "step_trace_time.csv", [step])
    assert st.read_text().splitlines()[0].split(",") == STEP_TRACE_TIME
    (back,) = readers.read_step_trace_time(st)
    assert (back.step, back.computing_us, back.free_us, back.total_us) == (4, 10.0, 5.0, 15.0)


def test_step_trace_time_old_ten_columns(tmp_path: Path) -> None:
    path = tmp_path / "step_trace_time.csv"
    path.write_text(",".join(STEP_TRACE_TIME[1:]) + "\n3,35.64,0,0,0,2214.72,2250.36,0,0,0\n")
    (row,) = readers.read_step_trace_time(path)
    assert (row.step, row.computing_us, row.free_us, row.device_id) == (3, 35.64, 2214.72, None)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "file is empty"),
        ("OP Type,Core Type,Count\nMatMul,AI_CORE,3\n", "column 'Total Time(us)'"),
        (
            "Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n"
            "0,MatMul,AI_CORE,3,30.0,10.0\n",
            ":2: 6 fields where the header has 9",
        ),
        (
            "Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n"
            "0,MatMul,AI_CORE,three,30,10,10,10,100\n",
            ":2: column 'Count' holds 'three'",
        ),
        (
            "Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n"
            "0,MatMul,AI_CORE,3,nan,10,10,10,100\n",
            "column 'Total Time(us)' holds 'nan'",
        ),
    ],
)
def test_damaged_op_statistic_names_file_line_column(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "op_statistic_20260101000000.csv"
    path.write_text(content)
    with pytest.raises(LabError) as err:
        readers.read_op_statistic(path)
    assert str(path) in str(err.value) and message in str(err.value)


def test_missing_file_and_bad_json(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="file not found"):
        readers.read_op_summary(tmp_path / "nope.csv")
    bad = tmp_path / "trace_view.json"
    bad.write_text('[{"ph": "X", "ts": "1.0"')
    with pytest.raises(LabError, match="not valid JSON"):
        readers.read_trace(bad)


def test_bom_and_crlf_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "op_statistic.csv"
    path.write_bytes(
        "\ufeffOP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\r\n"
        "MatMulV2,AI_CORE,4,40,10,10,10,100\r\n".encode()
    )
    (row,) = readers.read_op_statistic(path)
    assert (row.op_type, row.count, row.device_id) == ("MatMulV2", 4, None)
