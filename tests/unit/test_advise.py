"""``python -m common advise``: msprof-analyze advisor's rules on captures the lab did not write, held against
what the advisor itself reported on the same real captures (tests/fixtures/msprof_analyze_advisor/)."""

from __future__ import annotations

import copy
import json
import shutil
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES, ROOT, error_lines, run

from common.analyze.advisor import CLEAR, FOUND, NOT_RUN
from common.analyze.advisor.parity import parity
from common.analyze.advisor.rules import advise
from common.formats.advice_input import read_capture_inputs

RECORDS = sorted((FIXTURES / "msprof_analyze_advisor").glob("*.json"))


def lab(*args: object):
    return run([sys.executable, "-m", "common", *map(str, args)])


def capture_copy(record: dict, tmp_path: Path) -> Path:
    """The record's capture, copied (database fixtures are WAL: SQLite writes beside them while reading)."""
    source, target = ROOT / record["capture"], tmp_path / "capture"
    shutil.copytree(source, target)
    return target


@pytest.mark.parametrize("path", RECORDS, ids=[p.stem for p in RECORDS])
def test_every_problem_the_advisor_reports_is_in_advise_with_the_same_key_figure(path: Path, tmp_path: Path) -> None:
    record = json.loads(path.read_text())
    assert record["problems"], f"{path.name}: the advisor reported nothing; the record proves nothing"
    matches = parity(record, advise(read_capture_inputs(capture_copy(record, tmp_path))))
    assert len(matches) == len(record["problems"])
    bad = [m for m in matches if not m.ok]
    assert not bad, "\n".join(f"{m.category}: {m.figure}: advisor {m.advisor} / lab {m.lab}" for m in bad)


def test_a_wrong_or_missing_figure_is_caught(tmp_path: Path) -> None:
    record = json.loads((FIXTURES / "msprof_analyze_advisor" / "cnn_2rank_text_level1.json").read_text())
    findings = advise(read_capture_inputs(capture_copy(record, tmp_path)))
    align = next(f for f in findings if f.rule == "Byte Alignment Analysis")
    for figures in align.figures["per_rank"].values():
        figures["ops"] = {name: size + 512 for name, size in figures["ops"].items()}
    changed = copy.deepcopy(record)
    changed["problems"].append({**changed["problems"][0], "category": "SyncBatchNorm Issues"})
    result = {m.category: m.ok for m in parity(changed, findings)}
    assert result["Byte Alignment Analysis"] is False  # the sizes differ
    assert result["SyncBatchNorm Issues"] is False  # the lab ran it and found nothing: not the advisor's finding
    assert result["Environment Variable Issues"] is True


def test_the_command_prints_every_rule_once_and_its_json_holds_the_figures(tmp_path: Path) -> None:
    record = json.loads((FIXTURES / "msprof_analyze_advisor" / "cnn_2rank_db_level1.json").read_text())
    capture = capture_copy(record, tmp_path)
    proc = lab("advise", capture)
    assert proc.returncode == 0, proc.stderr
    assert "-- FOUND: Byte Alignment Analysis (ranks 0, 1) --" in proc.stdout
    assert "fix: the 'aoe' pair" in proc.stdout  # the no-bound finding names its fix pair
    proc = lab("advise", capture, "--json")
    doc = json.loads(proc.stdout)
    assert doc["ranks"] == [0, 1]
    rules = [f["rule"] for f in doc["findings"]]
    assert len(rules) == len(set(rules)) >= 26
    assert {f["status"] for f in doc["findings"]} <= {FOUND, CLEAR, NOT_RUN}
    assert all(f["text"] for f in doc["findings"])  # found, clear or not run: each says what or why
    no_bound = next(f for f in doc["findings"] if f["rule"] == "Operator No Bound Issues")
    assert no_bound["figures"]["per_rank"]["0"]["count"] == 171
    gc = next(f for f in doc["findings"] if f["rule"] == "GC Analysis")
    assert gc["status"] == NOT_RUN and "gc_detect_threshold" in gc["text"]


def test_a_torch_profiler_trace_is_advised_through_the_harness_conversion(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": name, "ts": 100.0 * i, "dur": 50.0, "pid": 1, "tid": 1}
        for i, name in enumerate(["aten::linear", "aten::gelu", "aten::linear", "aten::gelu"])
    ]
    events.append(
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "Optimizer.step#AdamW.step",
            "ts": 500.0,
            "dur": 40.0,
            "pid": 1,
            "tid": 1,
        }
    )
    trace = tmp_path / "mine" / "host_1.pt.trace.json"
    trace.parent.mkdir()
    trace.write_text(json.dumps({"traceEvents": events}))
    proc = lab("advise", trace.parent, "--json")
    assert proc.returncode == 0, proc.stderr
    affinity = next(f for f in json.loads(proc.stdout)["findings"] if f["rule"] == "Affinity API Issues")
    assert affinity["status"] == FOUND
    assert set(affinity["figures"]["apis"]) == {"torch_npu.fast_gelu", "torch_npu.optim.NpuFusedAdamW"}
    assert sorted(p.name for p in trace.parent.iterdir()) == ["host_1.pt.trace.json"]  # the input is only read


def test_the_recorded_environment_of_a_lab_run_is_judged(tmp_path: Path) -> None:
    from common.formats.rundir import start_run

    capture = tmp_path / "run"
    shutil.copytree(FIXTURES / "npu" / "cann85_minimal", capture)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ACLNN_CACHE_LIMIT", "100000")
        start_run(capture, mode="cmdline", backend="npu", device=0, command=["x"])
    env = next(f for f in advise(read_capture_inputs(capture)) if f.rule == "Environment Variable Issues")
    assert env.status == FOUND
    assert env.figures["variables"] == ["HOST_CACHE_CAPACITY", "PYTORCH_NPU_ALLOC_CONF"]  # ACLNN_CACHE_LIMIT is set


@pytest.mark.parametrize(
    "args, message", [(["no_such_folder"], "no_such_folder"), (["tests/fixtures/npu/README.md"], "README.md")]
)
def test_a_mistake_is_one_line(args: list[str], message: str) -> None:
    proc = lab("advise", *args)
    assert proc.returncode != 0
    assert len(error_lines(proc.stderr)) == 1 and message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_portable_run_is_not_judged_on_npu_variables_and_report_shows_what_fired(tmp_path: Path) -> None:
    from common.formats.rundir import start_run

    capture = tmp_path / "run"
    shutil.copytree(FIXTURES / "npu" / "torch_npu_aicpu_kernel_details", capture)
    start_run(capture, mode="pytorch", backend="portable", device=0, command=["x"])
    env = next(f for f in advise(read_capture_inputs(capture)) if f.rule == "Environment Variable Issues")
    assert env.status == NOT_RUN and "portable run" in env.text
    proc = lab("report", capture, "--out", tmp_path / "report")
    assert "-- Advisor: AICPU Issues: ASCEND_PROFILER_OUTPUT --" in proc.stdout
    assert "Advisor: Environment" not in proc.stdout


def _tasks(gap_us: float, mte_us: float, repeats: int = 8) -> list:
    from common.formats.records import Task

    pmu = {
        "aic_mte2_time(us)": mte_us,
        "aiv_mte2_time(us)": 0.0,
        "aic_fixpipe_time(us)": 0.0,
        "aiv_mte3_time(us)": 0.0,
        "aicore_time(us)": 10.0,
    }
    tasks, start = [], 0.0
    for _ in range(repeats):
        for name in ("Mul", "Add", "Relu"):
            tasks.append(Task(name, name, "AI_CORE", start, 10.0, input_shapes="8,8", output_shapes="8,8", pmu=pmu))
            start += 10.0 + gap_us
    return tasks


@pytest.mark.parametrize("gap_us, mte_us, status", [(100.0, 0.0, FOUND), (0.0, 9.0, FOUND), (0.0, 1.0, CLEAR)])
def test_a_repeated_run_of_ops_is_fusible_when_host_or_mte_bound(gap_us: float, mte_us: float, status: str) -> None:
    from types import SimpleNamespace

    from common.analyze.advisor.operators import fusible_operators

    f = fusible_operators(SimpleNamespace(tasks=_tasks(gap_us, mte_us)))
    assert f.status == status, f.text
    if status == FOUND:  # the longest repeated run is named once, not each of its prefixes
        assert all(row[2] > 5 for row in f.rows) and len({row[3] for row in f.rows}) == len(f.rows)


def test_the_cpu_twins_pipe_timers_are_not_judged_as_an_ai_cores() -> None:
    from types import SimpleNamespace

    from common.analyze.advisor.operators import fusible_operators, no_bound

    tasks = _tasks(100.0, 0.0)
    for t in tasks:
        t.task_type = "CPU"
        t.pmu = {**t.pmu, "aiv_vec_ratio": 0.4}
    rank = SimpleNamespace(tasks=tasks)
    assert no_bound(rank).status == NOT_RUN and "CPU twin" in no_bound(rank).text
    assert fusible_operators(rank).status == NOT_RUN


def test_an_sdma_op_under_a_long_matmul_is_contended_however_many_matmuls_started_since() -> None:
    from types import SimpleNamespace

    from common.analyze.advisor.communication import bandwidth_contention
    from common.formats.communication import CommTiming, LinkTransfer
    from common.formats.records import Task

    long = Task("MatMul_long", "MatMul", "AI_CORE", 0.0, 10_000.0)
    short = [Task(f"MatMul_{i}", "MatMul", "AI_CORE", 10.0 + i, 0.5) for i in range(100)]

    def op(start_us: float, gbs: float) -> CommTiming:
        return CommTiming(
            "step1",
            "collective",
            f"hcom_allReduce_{start_us:g}",
            "g",
            start_us,
            0.1,
            0.1,
            0,
            0,
            0,
            (LinkTransfer("SDMA", 1.0, 0.1, gbs),),
        )

    rank = SimpleNamespace(
        tasks=[long, *short], communication=[op(5_000.0, 10.0), op(5_000.0, 20.0), op(20_000.0, 10.0)]
    )
    f = bandwidth_contention(rank)
    assert f.status == FOUND and [r[0] for r in f.rows] == ["hcom_allReduce_5000"]  # slow and under a MatMul only
