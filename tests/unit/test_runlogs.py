"""Each run's logs: CANN's log variables for npu programs, stderr kept beside them, and the failure report."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from common.collect import launcher, runlogs
from common.errors import LabError

# A host plog as CANN writes it ({debug,run,security}/plog/plog-<pid>_<timestamp>.log), lines in the
# documented format: [Level] ModuleName(PID,PName):DateTimeMS [FileName:LineNumber]LogContent
PLOG = """\
[INFO] ASCENDCL(40321,python3):2026-12-01-10:02:11.100.201 [acl.cpp:102]40321 aclInit: start to execute aclInit
[WARNING] RUNTIME(40321,python3):2026-12-01-10:02:11.310.005 [device.cc:88]40321 Init: device memory is low
[ERROR] RUNTIME(40321,python3):2026-12-01-10:02:12.001.422 [api_c.cc:130]40321 rtSetDevice: invalid device id 9
[ERROR] ASCENDCL(40321,python3):2026-12-01-10:02:12.001.500 [device.cpp:61]40321 aclrtSetDevice: set device 9 failed, runtime result = 107001
[EVENT] PROFILING(40321,python3):2026-12-01-10:02:12.002.000 [prof.cpp:20]40321 profiling stopped
"""


def _write_plog(root: Path, kind: str = "debug", pid: int = 40321, text: str = PLOG) -> Path:
    path = root / kind / "plog" / f"plog-{pid}_20261201100211100.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# --- the environment of npu programs -----------------------------------------------------------------
def test_npu_children_log_into_the_output_folder_at_cann_default_level(tmp_path: Path) -> None:
    env = runlogs.npu_log_env({}, tmp_path / "prof_out")
    assert env == {
        "ASCEND_PROCESS_LOG_PATH": str((tmp_path / "prof_out" / "logs").resolve()),
        "ASCEND_GLOBAL_LOG_LEVEL": "3",
    }
    assert Path(env["ASCEND_PROCESS_LOG_PATH"]).is_relative_to((tmp_path / "prof_out").resolve())


@pytest.mark.parametrize("level", ["0", "1", "2", "3", "4", " 1 "])
def test_a_users_valid_log_level_is_kept(tmp_path: Path, level: str) -> None:
    assert runlogs.npu_log_env({"ASCEND_GLOBAL_LOG_LEVEL": level}, tmp_path)["ASCEND_GLOBAL_LOG_LEVEL"] == level.strip()


@pytest.mark.parametrize("level", ["5", "-1", "WARNING", "debug"])
def test_a_log_level_cann_would_ignore_is_refused_in_one_line(tmp_path: Path, level: str) -> None:
    with pytest.raises(LabError, match="ASCEND_GLOBAL_LOG_LEVEL") as err:
        runlogs.npu_log_env({"ASCEND_GLOBAL_LOG_LEVEL": level}, tmp_path)
    assert "3 (ERROR)" in err.value.fix and "\n" not in str(err.value)


def _unset(monkeypatch, *names: str) -> None:
    """Unset for this test only (setenv first, so the original state, set or not, comes back after)."""
    for name in names:
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


def test_npu_run_sets_the_log_env_for_children_and_for_itself(tmp_path: Path, monkeypatch) -> None:
    _unset(monkeypatch, "ASCEND_PROCESS_LOG_PATH", "ASCEND_GLOBAL_LOG_LEVEL")
    child_env: dict[str, str] = {"PATH": "/bin"}
    runlogs.use_run_logs(True, tmp_path, child_env)
    want = str(tmp_path.resolve() / "logs")
    assert child_env["ASCEND_PROCESS_LOG_PATH"] == want and child_env["ASCEND_GLOBAL_LOG_LEVEL"] == "3"
    assert os.environ["ASCEND_PROCESS_LOG_PATH"] == want  # mode 04 runs torch_npu in this process


def test_portable_run_leaves_the_environment_alone(tmp_path: Path, monkeypatch) -> None:
    _unset(monkeypatch, "ASCEND_PROCESS_LOG_PATH")
    child_env: dict[str, str] = {}
    assert runlogs.use_run_logs(False, tmp_path, child_env) == {} and child_env == {}
    assert "ASCEND_PROCESS_LOG_PATH" not in os.environ


# --- CANN's log files ------------------------------------------------------------------------------
def test_last_error_lines_of_a_plog(tmp_path: Path) -> None:
    errors = runlogs.last_errors(_write_plog(tmp_path))
    assert [e.split("]", 1)[0] for e in errors] == ["[ERROR", "[ERROR"]
    assert errors[-1].startswith("[ERROR] ASCENDCL(40321,python3):") and "runtime result = 107001" in errors[-1]
    assert runlogs.last_errors(_write_plog(tmp_path), limit=1) == errors[-1:]


def test_cann_logs_finds_host_and_device_logs_newest_first(tmp_path: Path) -> None:
    old = _write_plog(tmp_path, "run", pid=1)
    device = tmp_path / "debug" / "device-0" / "device-40321_20261201100212000.log"
    device.parent.mkdir(parents=True)
    device.write_text("[ERROR] CCECPU(77,aicpu):2026-12-01-10:02:12.500.000 [ae.cc:9]77 kernel failed\n")
    os.utime(old, (1, 1))
    (tmp_path / "debug" / "plog" / "notes.txt").parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "debug" / "plog" / "notes.txt").write_text("not a log")
    assert runlogs.cann_logs(tmp_path) == [device, old]
    assert runlogs.cann_logs(tmp_path / "missing") == []


# --- stderr kept, and the failure report -----------------------------------------------------------
def test_a_programs_stderr_is_shown_and_kept_in_the_output_folder(tmp_path: Path, capfd) -> None:
    log = runlogs.stderr_log(tmp_path, [sys.executable])
    code = "import sys; print('out'); print('Traceback: boom', file=sys.stderr); sys.exit(3)"
    run = launcher.run_command([sys.executable, "-c", code], stderr_log=log)
    assert run.exit_code == 3
    assert log.parent == tmp_path.resolve() / "logs" and log.name.startswith("01-python")
    assert log.read_text() == "Traceback: boom\n"
    assert "Traceback: boom" in capfd.readouterr().err  # still shown as it came
    assert runlogs.stderr_log(tmp_path, ["/usr/bin/msprof"]).name == "02-msprof.stderr.log"


def test_portable_failure_report_names_the_stderr_file(tmp_path: Path) -> None:
    log = runlogs.stderr_log(tmp_path, ["add_custom_main"])
    log.write_text("line 1\nerror: verification failed at 17\n")
    report = runlogs.failure_report(tmp_path, is_npu=False)
    assert report[0] == "logs of this run:" and str(log) in report[1]
    assert report[-1].strip() == "error: verification failed at 17"
    assert not any("msnpureport" in line for line in report)


def test_portable_failure_report_is_empty_when_stderr_was(tmp_path: Path) -> None:
    runlogs.stderr_log(tmp_path, ["app"]).write_text("")
    assert runlogs.failure_report(tmp_path, is_npu=False) == []


def test_npu_failure_report_quotes_the_plogs_last_errors_and_the_device_log_command(tmp_path: Path) -> None:
    plog = _write_plog(runlogs.log_dir(tmp_path))
    report = "\n".join(runlogs.failure_report(tmp_path, is_npu=True))
    assert f"CANN log {plog}, its last ERROR lines:" in report
    assert "aclrtSetDevice: set device 9 failed" in report and "[INFO]" not in report
    assert "msnpureport" in report and "timestamped subfolder" in report


def test_npu_failure_report_without_error_lines_says_how_to_see_more(tmp_path: Path, monkeypatch) -> None:
    _unset(monkeypatch, "ASCEND_SLOG_PRINT_TO_STDOUT")
    _write_plog(runlogs.log_dir(tmp_path), text=PLOG.replace("[ERROR]", "[INFO]"))
    report = "\n".join(runlogs.failure_report(tmp_path, is_npu=True))
    assert "1 file(s), no ERROR line" in report and "ASCEND_GLOBAL_LOG_LEVEL=1" in report


def test_failed_npu_step_names_the_log_folder(tmp_path: Path) -> None:
    env = runlogs.npu_log_env({}, tmp_path)
    assert str(tmp_path.resolve() / "logs") in runlogs.where_to_look(env)
    assert runlogs.where_to_look({}) == "read the messages above"
    assert runlogs.stderr_log_beside(env, ["msprof"]) == tmp_path.resolve() / "logs" / "01-msprof.stderr.log"
    assert runlogs.stderr_log_beside({}, ["msprof"]) is None


def test_an_incomplete_run_prints_its_failure_report(tmp_path: Path, capsys) -> None:
    from common.modes.lesson import Run

    log = runlogs.stderr_log(tmp_path, ["model.py"])
    log.write_text("RuntimeError: the model failed\n")
    run = Run("cmdline", tmp_path, None, type("B", (), {"is_npu": False})(), [0], tmp_path, {})
    run.finish(completed=False)
    err = capsys.readouterr().err
    assert str(log) in err and "RuntimeError: the model failed" in err
    run.finish(completed=True)
    assert capsys.readouterr().err == ""
