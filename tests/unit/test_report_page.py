"""report.html of a real 2-rank capture read at a glance: every PMU chart under its op, integrity last unless it fails."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from helpers import FIXTURES, dir_report


CAPTURE = FIXTURES / "npu" / "msinsight_torch_npu" / "text_level1"


def _titles(page: str) -> list[str]:
    return re.findall(r"<h2>(.*?)</h2>", page)


def test_every_pmu_chart_is_labelled_with_its_op() -> None:
    page = dir_report(CAPTURE)[2]
    for section in re.findall(r"<h2>Pipes \(PMU\).*?</section>", page, flags=re.S):
        charts = re.findall(
            r"(<p class=\"v\"><b>[^<]+</b> \(\d+ tasks\):[^<]*</p>)?<svg class=\"chart\" "
            r"data-chart=\"pipes\"",
            section,
        )
        assert charts and all(charts), "a pipes chart without its op label"
    assert '<p class="v"><b>TransData</b> (57 tasks): aiv_mte2 0.35 leads' in page


def test_integrity_comes_last_when_it_holds_and_first_when_it_fails(tmp_path: Path) -> None:
    titles = _titles(dir_report(CAPTURE)[2])
    assert titles[-1].startswith("Integrity") and titles[:2] == ["Run", "Op time by family"]
    root = tmp_path / "text_level1"
    shutil.copytree(CAPTURE, root)
    stat = root / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv"
    lines = stat.read_text().splitlines()
    cells = lines[1].split(",")
    cells[2] = str(int(cells[2]) + 1)  # Count: one more task than kernel_details holds
    stat.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    titles = _titles(dir_report(root)[2])
    assert titles[0].startswith("Integrity")
