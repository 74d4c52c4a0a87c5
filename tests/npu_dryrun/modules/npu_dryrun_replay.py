# TEST DOUBLE for the NPU dry run (tests/npu_dryrun): never used outside the tests.
"""Outputs of the real tools, replayed from real captures under the folder and file names the tools use.

Nothing here measures anything: the numbers are those of the captures (other workloads, see
tests/npu_dryrun/captures/README.md), so the lab's readers, checks and reports run on real file
shapes while every workload-specific check is free to fail. What is adapted: the timestamps in
the names (msprof's ``<name>_<14 digits>``), and the device id column, set to the device the
program really selected, as the real tool would write it.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import random
import shutil
import string
from pathlib import Path

FIXTURES_VAR = "NPU_DRYRUN_CAPTURES"  # tests/npu_dryrun/captures
LAB_FIXTURES_VAR = "NPU_DRYRUN_FIXTURES"  # tests/fixtures/npu

MSPROF_EXPORT = "cann85_minimal/PROF_000001_20260101000000000_SANITIZEDFIXTURE/mindstudio_profiler_output"
TRACE_VIEW = "torch_npu_trace_view/localhost_437675_20240102021151000_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"


def _lab_fixtures() -> Path:
    return Path(os.environ[LAB_FIXTURES_VAR])


def _captures() -> Path:
    return Path(os.environ[FIXTURES_VAR])


def _stamp(now: dt.datetime | None = None) -> tuple[str, str]:
    now = now or dt.datetime.now()
    return now.strftime("%Y%m%d%H%M%S"), now.strftime("%Y%m%d%H%M%S") + f"{now.microsecond // 1000:03d}"


def _tag() -> str:
    return "".join(random.choices(string.ascii_uppercase + string.digits, k=16))


def _with_device(text: str, column: str, device: int) -> str:
    """The CSV with ``column`` set to ``device`` where it holds a number (``host`` rows stay), bytes otherwise kept."""
    lines = text.splitlines(keepends=True)
    if not lines:
        return text
    header = next(csv.reader([lines[0]]))
    if column not in header:
        return text
    at = header.index(column)
    out = [lines[0]]
    for line in lines[1:]:
        cells = next(csv.reader([line]), [])
        if at < len(cells) and cells[at].strip().isdigit():
            buf = io.StringIO()
            cells[at] = str(device)
            csv.writer(buf, lineterminator="").writerow(cells)
            line = buf.getvalue() + ("\n" if line.endswith("\n") else "")
        out.append(line)
    return "".join(out)


def write_export(prof_dir: Path, device: int) -> Path:
    """``<PROF>/mindstudio_profiler_output/<name>_<ts>.csv|json`` (and the log folder), as ``msprof --export`` does."""
    ts, _ = _stamp()
    out = prof_dir / "mindstudio_profiler_output"
    out.mkdir(parents=True, exist_ok=True)
    (prof_dir / "mindstudio_profiler_log").mkdir(exist_ok=True)
    for src in sorted((_lab_fixtures() / MSPROF_EXPORT).iterdir()):
        name, suffix = src.stem.rsplit("_", 1)[0], src.suffix
        text = src.read_text(encoding="utf-8")
        if suffix == ".csv":
            text = _with_device(text, "Device_id", device)
        (out / f"{name}_{ts}{suffix}").write_text(text, encoding="utf-8")
    (out / "README.txt").write_text("replayed by the NPU dry run from tests/fixtures/npu/cann85_minimal\n")
    return out


def write_raw_prof(parent: Path, devices: list[int]) -> Path:
    """``PROF_000001_<17 digits>_<16 chars>/`` with ``host/data`` and ``device_<id>/data``: collection, not export."""
    _, ts17 = _stamp()
    prof = parent / f"PROF_000001_{ts17}_{_tag()}"
    (prof / "host" / "data").mkdir(parents=True)
    for d in devices:
        (prof / f"device_{d}" / "data").mkdir(parents=True)
        (prof / f"device_{d}" / f"info.json.{d}").write_text(json.dumps({"devices": str(d), "rank_id": -1}) + "\n")
    return prof


def raw_devices(prof_dir: Path) -> list[int]:
    return sorted(int(p.name.split("_", 1)[1]) for p in prof_dir.glob("device_*") if p.name.split("_", 1)[1].isdigit())


def write_opprof(parent: Path, device: int) -> Path:
    """``OPPROF_<14 digits>_<16 chars>/`` with OpBasicInfo.csv, PipeUtilization.csv and dump/ (msprof op, one launch)."""
    ts, _ = _stamp()
    out = parent / f"OPPROF_{ts}_{_tag()}"
    (out / "dump").mkdir(parents=True)
    for src in sorted((_captures() / "msprof_op_cann85").glob("*.csv")):
        text = src.read_text(encoding="utf-8")
        if src.name == "OpBasicInfo.csv":
            text = _with_device(text, "Device Id", device)
        (out / src.name).write_text(text, encoding="utf-8")
    return out


def write_opprof_simulator(parent: Path, block_dim: int) -> Path:
    """``OPPROF_<ts>_<tag>/`` as msprof op simulator leaves it: ``dump/`` and ``simulator/`` with one
    ``core<i>.veccore<j>/`` folder per vector block (``<core>_code_exe.csv``, ``<core>_instr_exe.csv``,
    ``trace.json``), plus ``simulator/trace.json`` and ``visualize_data.bin``. No simulator capture exists
    for this stand-in: the folder and file names and the CSV columns are those the msOpProf simulator
    data page lists; the values are made up, and block b's folder being core<b // 2>.veccore<b % 2> is
    the stand-in's assumption."""
    ts, _ = _stamp()
    out = parent / f"OPPROF_{ts}_{_tag()}"
    (out / "dump").mkdir(parents=True)
    sim = out / "simulator"
    for block in range(block_dim):
        core = f"core{block // 2}.veccore{block % 2}"
        (sim / core).mkdir(parents=True)
        (sim / core / f"{core}_code_exe.csv").write_text(
            "code,call_count,cycles,running_time(us)\n"
            "add_pyasc.py:86,32,2048,1.28\nadd_pyasc.py:90,16,1024,0.64\nadd_pyasc.py:94,16,768,0.48\n"
        )
        (sim / core / f"{core}_instr_exe.csv").write_text(
            "instr,addr,pipe,call_count,cycles,running_time(us),detail\n"
            "MOV_OUT_TO_UB,0x100,MTE2,32,2048,1.28,NA\nVADD,0x180,VEC,16,1024,0.64,NA\n"
            "MOV_UB_TO_OUT,0x1c0,MTE3,16,768,0.48,NA\nSET_FLAG,0x1e0,SCALAR,48,96,0.06,NA\n"
        )
        (sim / core / "trace.json").write_text(json.dumps({"traceEvents": []}))
    (sim / "trace.json").write_text(json.dumps({"traceEvents": []}))
    (sim / "visualize_data.bin").write_bytes(b"NPU_DRYRUN_STAND_IN")
    return out


def write_ascend_pt(parent: Path, worker: str, rank: int | None, device: int, info: dict, keep_prof: bool) -> Path:
    """``<worker>_<17 digits>_ascend_pt/`` as torch_npu's tensorboard_trace_handler leaves it after parsing."""
    _, ts17 = _stamp()
    out = parent / f"{worker}_{ts17}_ascend_pt"
    src = _captures() / "torch_npu_level1" / f"rank{rank or 0}_ascend_pt"
    shutil.copytree(src / "ASCEND_PROFILER_OUTPUT", out / "ASCEND_PROFILER_OUTPUT")
    shutil.copy2(_lab_fixtures() / TRACE_VIEW, out / "ASCEND_PROFILER_OUTPUT" / "trace_view.json")
    shutil.copy2(src / "profiler_metadata.json", out / "profiler_metadata.json")
    for path in (out / "ASCEND_PROFILER_OUTPUT").glob("*.csv"):
        path.write_text(_with_device(path.read_text(encoding="utf-8"), "Device_id", device), encoding="utf-8")
    name = "profiler_info.json" if rank is None else f"profiler_info_{rank}.json"
    (out / name).write_text(json.dumps(info, indent=4), encoding="utf-8")
    (out / "FRAMEWORK").mkdir()
    (out / "logs").mkdir()
    if keep_prof:  # data_simplification=False keeps CANN's own export beside torch_npu's
        prof = write_raw_prof(out, [device])
        write_export(prof, device)
    return out
