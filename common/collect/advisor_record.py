"""What msprof-analyze's advisor reported on a capture, as a JSON-able record: its problems and sheets.

``msprof-analyze advisor all -d CAPTURE -o OUT -l en`` writes ``OUT/log/mstt_advisor_<ts>.xlsx``: a
``problems`` sheet (category, description, suggestion, problem count ...) and one sheet per problem
with its rows. :func:`record_advisor` runs it on a copy of the capture (the tool writes beside its
input) and reads the workbook; :mod:`common.analyze.advisor.parity` holds the lab's findings against it.
The records of the real captures in tests/fixtures/npu are kept in tests/fixtures/msprof_analyze_advisor/
(``python -m common.collect.advisor_record`` writes them again).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

from common.collect.msprof_analyze import ensure_tool, run_tool, tool_version, xlsx_rows, xlsx_sheets
from common.formats.rundir import REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "npu"
RECORDS = REPO_ROOT / "tests" / "fixtures" / "msprof_analyze_advisor"
# the real captures the advisor is run on, by record name -> folder under tests/fixtures/npu
CAPTURES = {
    "cnn_2rank_text_level1": "msinsight_torch_npu/text_level1",
    "cnn_2rank_text_level0": "msinsight_torch_npu/text_level0",
    "cnn_2rank_db_level1": "msinsight_torch_npu/db_level1",
    "megatron_pp2_dp2_level2": "megatron_pp2_dp2/level2",
    "kernel_details_pipe_utilization": "torch_npu_kernel_details",
    "kernel_details_aicpu": "torch_npu_aicpu_kernel_details",
    "trace_only": "torch_npu_trace_view",
}


def _table(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """A sheet's rows keyed by its header row."""
    if not rows:
        return []
    header = rows[0]
    return [{header.get(col, col): value for col, value in row.items()} for row in rows[1:]]


def read_workbook(path: Path) -> dict:
    sheets = {name: _table(xlsx_rows(path, name)) for name in xlsx_sheets(path)}
    problems = sheets.pop("problems", [])
    return {"problems": problems, "sheets": sheets}


def record_advisor(exe: Path, capture: Path, work: Path) -> dict:
    """Run ``advisor all`` on a copy of ``capture`` (SQLite writes beside a database while it reads it: the input
    stays untouched), its output into ``work``; the problems and sheets it wrote. The copy is a temporary folder
    of its own: ``work`` may lie inside ``capture`` (``nox -s ecosystem`` writes into the candidate's folder)."""
    out = work / "advisor"
    out.mkdir()
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "capture"
        shutil.copytree(capture, copy)
        run_tool(exe, ["advisor", "all", "-d", str(copy), "-o", str(out.resolve()), "-l", "en"], work / "advisor.log")
    books = sorted((out / "log").glob("mstt_advisor_*.xlsx"))
    if not books:
        return {"problems": [], "sheets": {}}
    return read_workbook(books[-1])


def main() -> int:
    exe = ensure_tool()
    version = tool_version(exe)
    RECORDS.mkdir(parents=True, exist_ok=True)
    for name, folder in CAPTURES.items():
        with tempfile.TemporaryDirectory() as work:
            record = record_advisor(exe, FIXTURES / folder, Path(work))
        record = {
            "tool": f"msprof-analyze {version}",
            "capture": f"tests/fixtures/npu/{folder}",
            "command": "msprof-analyze advisor all -d <capture> -o <out> -l en",
            **record,
        }
        (RECORDS / f"{name}.json").write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{name}: {len(record['problems'])} problem(s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
