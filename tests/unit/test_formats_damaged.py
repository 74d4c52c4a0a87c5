"""Every reader under bad input: the damaged-file corpus and property-based tests.

Each input either parses to the right numbers or stops with one LabError naming the file and,
for CSV, the line and the column (or field count); nothing else may escape.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import FIXTURES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.errors import LabError
from common.formats import readers, schema, writers
from common.formats.records import OpStat, Task

CORPUS = FIXTURES / "damaged"
READERS = {
    "op_summary": readers.read_op_summary,
    "kernel_details": readers.read_kernel_details,
    "op_statistic": readers.read_op_statistic,
    "api_statistic": readers.read_api_statistic,
    "task_time": readers.read_task_time,
    "step_trace_time": readers.read_step_trace_time,
    "msprof_json": readers.read_trace,
    "trace_view": readers.read_trace,
}
# The duration-like column each CSV kind was damaged in, and the line of its last data row.
DAMAGED_COLUMN = {
    "op_summary": ("Task Duration(us)", 3),
    "kernel_details": ("Duration(us)", 30),
    "op_statistic": ("Total Time(us)", 2),
    "api_statistic": ("Time(us)", 3),
    "task_time": ("task_time(us)", 4),
    "step_trace_time": ("Computing", 3),
}


def _expected(kind: str, damage: str) -> str | None:
    """The error text a damaged file must give, or None when it must parse."""
    if kind in DAMAGED_COLUMN:
        column, last = DAMAGED_COLUMN[kind]
        return {
            "truncated_mid_row": f":{last}: ",
            "empty": "file is empty",
            "non_utf8": f":{last}: not UTF-8 text (byte 0xff",
            "wrong_delimiter": ":1: the header is one column holding ';'",
            "extra_field": f":{last}: ",
            "missing_field": f":{last}: ",
            "missing_column": f"column {column!r} missing",
            "nan_duration": f":{last}: column {column!r} holds 'nan'",
            "inf_duration": f":{last}: column {column!r} holds 'inf'",
            "negative_duration": f":{last}: column {column!r} holds '-12.5', below 0",
            "duplicated_header": f":1: column {'Step Id' if kind == 'kernel_details' else 'Device_id'!r} appears twice",
        }.get(damage)
    return {
        "truncated": "not valid JSON",
        "empty": "file is empty",
        "non_utf8": "not valid JSON",
        "not_an_array": "expected a JSON array",
        "nan_ts": "'ts' is 'nan', not a number",
        "negative_dur": "negative 'dur'",
    }.get(damage)


def _clean_source(kind: str) -> list:
    """The reader's output on the undamaged file this corpus entry came from."""
    if kind == "step_trace_time":
        return readers.read_step_trace_time(CORPUS / "step_trace_time__bom.csv")  # BOM-only copy of the source
    name = {
        "op_summary": "op_summary_*.csv",
        "op_statistic": "op_statistic_*.csv",
        "api_statistic": "api_statistic_*.csv",
        "task_time": "task_time_*.csv",
        "msprof_json": "msprof_*.json",
    }.get(kind)
    if name:
        return READERS[kind](next(FIXTURES.glob(f"npu/cann85_minimal/PROF_*/mindstudio_profiler_output/{name}")))
    return readers.read_kernel_details(
        FIXTURES / "npu/torch_npu_kernel_details/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
    )


CASES = sorted(CORPUS.glob("*__*.*"))


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_damaged_file_parses_right_or_names_file_line_column(path: Path) -> None:
    kind, damage = path.stem.split("__")
    expected = _expected(kind, damage)
    if expected is None:
        got = READERS[kind](path)
        if damage == "header_only":
            assert got == []
        elif damage == "huge_field":
            clean = _clean_source(kind)
            assert len(got) == len(clean) and any("x" * 140_000 in str(r) or "k" * 140_000 in str(r) for r in got)
            assert got[:-1] == clean[:-1] if kind not in ("msprof_json",) else len(got) == len(clean)
        else:  # BOM, CRLF: the same rows as the clean file
            assert got == _clean_source(kind)
        return
    with pytest.raises(LabError) as err:
        READERS[kind](path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(str(path)), message
    assert expected in message, message
    if damage in ("truncated_mid_row", "extra_field", "missing_field"):
        assert re.search(r":\d+: \d+ fields where the header has \d+", message), message


# --- property-based ---------------------------------------------------------------------------------
texts = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
micros = st.integers(0, 10**12).map(lambda n: n / 1000)  # µs with 3 decimals, as msprof prints them


@st.composite
def tasks(draw) -> list[Task]:
    n = draw(st.integers(1, 6))
    out = []
    for _ in range(n):
        # names with commas, quotes, tabs and non-ASCII must survive the round trip; msprof strips edge decoration
        name = draw(texts).strip(' \t\r\n"')
        out.append(
            Task(
                name or "op",
                name or "op",
                draw(st.sampled_from(["AI_CORE", "CPU", "MIX_AIC"])),
                draw(micros),
                draw(micros),
                draw(micros),
                "0",
                block_dim=draw(st.integers(0, 64)),
                input_shapes=draw(st.sampled_from([None, "32,1024;1024,1024", "8,16"])),
            )
        )
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tasks())
def test_op_summary_round_trip_exact(tmp_path_factory, written: list[Task]) -> None:
    path = writers.write_op_summary(tmp_path_factory.mktemp("rt") / "op_summary_20260101000000.csv", written)
    back = readers.read_op_summary(path)
    missing = {"N/A", "NA", "n/a", "None", ""}
    for w, b in zip(written, back, strict=True):
        assert (b.start_us, b.duration_us, b.wait_us, b.block_dim) == (
            w.start_us,
            w.duration_us,
            w.wait_us,
            w.block_dim,
        )
        if w.op_type not in missing and "\n" not in w.op_type and "\r" not in w.op_type:
            assert b.op_type == w.op_type
        assert b.input_shapes == w.input_shapes


_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cell=st.one_of(
        texts,
        st.sampled_from(
            [
                "nan",
                "-inf",
                "1e400",
                "+.5",
                "1.",
                "-0",
                "1_0",
                "0x1f",
                "٣",
                "\t7.25\t",
                '"3"',
                "N/A",
                "NA",
                "",
                "3.5e2",
                "-2",
            ]
        ),
    )
)
def test_number_cell_is_right_or_an_error_naming_line_and_column(tmp_path_factory, cell: str) -> None:
    """Any text in a numeric cell: the exact float it spells, or a one-line error naming line 3 and the column."""
    path = tmp_path_factory.mktemp("num") / "op_statistic.csv"
    good = "0,MatMul,AI_CORE,3,30.5,10,10.1,10.4,100"
    quoted = '"' + cell.replace('"', '""') + '"'
    path.write_text(",".join(schema.OP_STATISTIC) + f"\n{good}\n0,Add,AI_CORE,1,{quoted},1,1,1,5\n", encoding="utf-8")
    text = cell.strip(' \t\r\n"')
    try:
        stats = readers.read_op_statistic(path)
    except LabError as err:
        message = str(err)
        assert ":3: column 'Total Time(us)'" in message and "\n" not in message
        ok = bool(_NUMBER.fullmatch(text)) and float(text) not in (float("inf"), float("-inf")) and float(text) >= 0
        assert not ok or text != text.strip(), message  # an error only for text that is not a finite number >= 0
        return
    assert text not in {"", "N/A", "NA", "n/a", "None"}, "a missing required cell must be an error"
    assert _NUMBER.fullmatch(text), f"{cell!r} read as a number"
    assert stats[1].total_us == float(text) and stats[1].total_us >= 0
    assert stats[0] == OpStat("MatMul", "AI_CORE", 3, 30.5, 10.0, 10.1, 10.4, 100.0, "0")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_damage_never_escapes_as_anything_but_one_error(tmp_path_factory, data) -> None:
    """Cut, insert or overwrite bytes anywhere in a real file: every reader parses or raises LabError, nothing else."""
    kind = data.draw(st.sampled_from(["op_summary", "kernel_details", "task_time", "msprof_json"]))
    source = {
        "op_summary": "op_summary__bom.csv",
        "kernel_details": "kernel_details__crlf.csv",
        "task_time": "task_time__bom.csv",
        "msprof_json": "msprof_json__crlf.json",
    }[kind]
    raw = (CORPUS / source).read_bytes()
    at = data.draw(st.integers(0, len(raw)))
    action = data.draw(st.sampled_from(["cut", "insert", "overwrite"]))
    junk = data.draw(st.binary(min_size=1, max_size=6))
    damaged = {
        "cut": raw[:at],
        "insert": raw[:at] + junk + raw[at:],
        "overwrite": raw[:at] + junk + raw[at + len(junk) :],
    }[action]
    path = tmp_path_factory.mktemp("fuzz") / Path(source).name
    path.write_bytes(damaged)
    try:
        rows = READERS[kind](path)
    except LabError as err:
        assert "\n" not in str(err) and str(path) in str(err)
        return
    for row in rows:  # what parses holds only finite, non-negative durations
        duration = (
            getattr(row, "duration_us", None) or getattr(row, "task_time_us", None) or getattr(row, "dur_us", None)
        )
        assert duration is None or 0 <= duration < float("inf")
