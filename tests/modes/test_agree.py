"""Cross-mode agreement, run comparison, the HTML report (in headless Chromium) and the 04 sweep.

One real run of all four modes, made once in a private copy of the repo with one run id, is
the input; the bad-input cases are copies of it with one thing changed.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import MODES, ROOT, copy_lab, error_lines, lab_env

from common.workload import tiny_mlp


def _sh(repo: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        list(args),
        cwd=repo,
        env=lab_env(PYTHONPATH=str(repo), MSPROF_LAB_RUN_ID="agree-test-run"),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def lab(repo: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m common ...`` inside ``repo``, as a user runs it."""
    return _sh(repo, sys.executable, "-m", "common", *args)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """A private repo copy in which every mode ran once, in one run (as nox runs them)."""
    target = copy_lab(tmp_path_factory.mktemp("lab") / "repo")
    for script in (
        ["01_cmdline/run.sh", "0"],
        ["02_api_AscendC/build.sh"],
        ["02_api_AscendC/run.sh", "0"],
        ["03_api_pyAcl/build_model.sh"],
        ["03_api_pyAcl/run.sh", "0"],
        ["04_pyTorch/run.sh", "0"],
    ):
        proc = _sh(target, "bash", *script)
        assert proc.returncode == 0, f"{script}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    return target


@pytest.fixture(scope="module")
def swept(repo: Path) -> subprocess.CompletedProcess:
    """A two-point sweep, before agree, so that the cross-mode page carries its chart too."""
    return _sh(repo, sys.executable, "-m", "common.modes.pytorch.sweep", "--hidden", "64,512", "--batch", "1")


@pytest.fixture(scope="module")
def agreed(repo: Path, swept) -> subprocess.CompletedProcess:
    return lab(repo, "agree")


def copy_outputs(repo: Path, tmp_path: Path) -> list[Path]:
    dirs = []
    for mode in MODES:
        shutil.copytree(repo / mode / "prof_out", tmp_path / mode / "prof_out")
        dirs.append(tmp_path / mode / "prof_out")
    return dirs


def edit_info(folder: Path, **changes: object) -> None:
    path = folder / "run_info.json"
    info = json.loads(path.read_text())
    info.update(changes)
    path.write_text(json.dumps(info))


# --- agree ------------------------------------------------------------------------------------------
SHARE_VERDICT = re.compile(
    r"^\[(PASS|FAIL|N/A)\] matmul share of forward time agrees \(01 vs 04\): (?:inconclusive: .*)?"
    r"01 median ([\d.]+)% \(IQR [\d.]+-[\d.]+, n 20\); 04 median ([\d.]+)% \(IQR [\d.]+-[\d.]+, n 5\): "
    r"difference ([\d.]+) points, tolerance ([\d.]+) points = 10 points allowed \+ [\d.]+ points "
    r"measured noise \(init ops excluded\)"
)


def test_agree_prints_the_table_then_passing_verdicts(repo: Path, agreed) -> None:
    out = agreed.stdout
    table_at, verdicts_at = out.index("-- The four modes side by side --"), out.index("-- Cross-mode verdicts --")
    assert table_at < verdicts_at
    header = next(line for line in out.splitlines() if line.lstrip().startswith("01_cmdline"))
    assert all(mode in header for mode in MODES)
    assert "backend: PORTABLE | run agree-te" in out
    sha = tiny_mlp().sha256
    assert f"workload: TinyMLP | sha256 {sha[:12]} | built in, workloads/tiny_mlp.py" in out
    verdicts = [line for line in out[verdicts_at:].splitlines() if line.startswith("[")]
    # Timing shares depend on how busy this machine is (another process can slow the small GELUs
    # of one mode many times over), so that one verdict is checked for consistency with its
    # numbers; every other check is exact and must pass.
    (share,) = [m for line in verdicts if (m := SHARE_VERDICT.match(line))]
    within = float(share[4]) <= float(share[5])
    assert share[1] == "PASS" if within else share[1] in ("FAIL", "N/A")  # N/A: too noisy to decide, said so
    assert abs(abs(float(share[2]) - float(share[3])) - float(share[4])) < 0.11
    others = [line for line in verdicts if not SHARE_VERDICT.match(line)]
    assert others and all(line.startswith("[PASS]") for line in others), others  # TinyMLP declares every EXPECT
    assert agreed.returncode == (1 if share[1] == "FAIL" else 0), agreed.stderr
    for name in (
        "matmul dominates (01)",
        "matmul dominates (03)",
        "matmul dominates (04)",
        "cast present (03 default)",
        "every forward records the same ops (01, 23 forwards)",
        "every step records the same ops (04, 5 steps)",
        "01 and 04 record the same ops per forward",
        "op counts per execute match the built graph (03 default",
        "the exported graph computes what the model",
        "mode 01 ran and its own checks held",
        "mode 03 ran and its own checks held",
        "op counts per launch (02)",
        "op time vs Computing (04)",
        "output matches fp32 reference (01)",
        "output matches fp32 reference (04)",
        "output verified (02)",
        "output matches fp32 reference (03 default)",
        "output matches fp32 reference (03 fp32)",
    ):
        assert any(line.startswith(f"[PASS] {name}") for line in verdicts), name
    # the table shows measured counts: 4 MatMul and 3 GELU per forward in 01, 03 and 04; Casts only in 03
    # (read from agree.md: the terminal table may cut its first column to fit the screen)
    markdown = (repo / "agree_out" / "agree.md").read_text()

    def row(name: str) -> list[str]:
        return [
            name,
            *(
                c.strip()
                for c in next(li for li in markdown.splitlines() if li.startswith(f"| {name} |"))
                .strip(" |")
                .split("|")[1:]
            ),
        ]

    assert row("workload, sha256")[1:] == [
        f"TinyMLP {sha[:12]}",
        "add_custom kernel",
        f"TinyMLP {sha[:12]}",
        f"TinyMLP {sha[:12]}",
    ]
    assert not any(f"| {family} per forward |" in markdown for family in ("conv", "attention", "pool", "norm"))

    assert row("matmul per forward")[1:] == ["4", "0", "4", "4"]  # 02: per kernel launch
    assert row("activation per forward")[1:] == ["3", "0", "3", "3"]
    assert row("elementwise per forward")[2] == "1"  # one add_custom task per launch
    assert (
        row("cast per forward")[1] == "0"
        and float(row("cast per forward")[3]) > 0
        and row("cast per forward")[4] == "0"
    )
    assert float(row("init ops, one-off (us, shown apart)")[1].replace(",", "")) > 0  # 01 sees weight init


def test_agree_judges_the_outputs_as_the_modes_did(repo: Path, agreed) -> None:
    """agree computes the reference with the thread count the runs recorded: the same sums, the same figures."""
    for mode, key in (("01_cmdline", "01"), ("04_pyTorch", "04")):
        line = f"output matches fp32 reference ({key}): max abs diff "
        own = (repo / mode / "prof_out" / "report.md").read_text()
        (mine,) = [x.split(line)[1].split(" ")[0] for x in own.splitlines() if line in x]
        (theirs,) = [x.split(line)[1].split(" ")[0] for x in agreed.stdout.splitlines() if line in x]
        assert mine == theirs, (mode, mine, theirs)


def test_agree_writes_markdown_and_html_for_the_run_and_each_mode(repo: Path, agreed) -> None:
    assert (repo / "agree_out" / "agree.md").read_text().startswith("# msprof lab: cross-mode agreement")
    for mode in MODES:
        assert (repo / mode / "prof_out" / "report.html").is_file(), mode


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: edit_info(d[2], backend="npu"),
            "Error: mixed backends: 01 portable, 02 portable, 03 npu, 04 portable",
        ),
        (lambda d: edit_info(d[3], train=True), "Error: mode 04 ("),  # a training run is not an inference run
        (lambda d: shutil.rmtree(d[1]), "Error: mode 02 (02_api_AscendC) missing"),
        (lambda d: (d[1] / "run_info.json").unlink(), "no run_info.json, so its backend and run cannot be checked"),
    ],
)
def test_agree_refuses_bad_inputs_with_one_line(repo: Path, tmp_path: Path, change, message: str) -> None:
    dirs = copy_outputs(repo, tmp_path)
    change(dirs)
    proc = lab(repo, "agree", *map(str, dirs), "--out", str(tmp_path / "agree_out"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(error_lines(proc.stderr)) == 1 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_agree_refuses_a_bad_output_folder_before_its_work(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("mine")
    (tmp_path / "not_the_labs").mkdir()
    for out, message in (
        (tmp_path / "a_file", "exists and is not a directory"),
        (tmp_path / "not_the_labs", "was not made by msprof lab"),
    ):
        proc = lab(repo, "agree", "--out", str(out))
        assert proc.returncode == 2 and proc.stdout == "", proc.stdout  # no report printed before the refusal
        assert len(error_lines(proc.stderr)) == 1 and message in proc.stderr, proc.stderr
    assert (tmp_path / "a_file").read_text() == "mine" and (tmp_path / "not_the_labs").is_dir()


def test_agree_with_a_mode_left_out_names_it(repo: Path, tmp_path: Path) -> None:
    dirs = copy_outputs(repo, tmp_path)
    proc = lab(repo, "agree", *map(str, [dirs[0], dirs[1], dirs[3]]), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and error_lines(proc.stderr) == [
        "Error: mode 03 (03_api_pyAcl) missing from the inputs — run it (nox -s pyacl) and pass its prof_out/ too"
    ]


def test_agree_allows_mixed_runs_only_when_asked(repo: Path, tmp_path: Path) -> None:
    dirs = copy_outputs(repo, tmp_path)
    edit_info(dirs[0], run_id="another-run", start="2020-01-01T00:00:00+00:00")
    proc = lab(repo, "agree", *map(str, dirs), "--allow-mixed-runs", "--out", str(tmp_path / "o"))
    assert proc.returncode in (0, 1) and "-- Cross-mode verdicts --" in proc.stdout, proc.stdout + proc.stderr
    assert "note: stale or mixed inputs: 01 (run another-" in proc.stdout


def test_agree_fails_when_a_count_is_off(repo: Path, tmp_path: Path) -> None:
    """One aten::addmm row less in 01's op_summary, in its last forward: that forward no longer holds what the
    first measured one holds; the check fails and names it, the run exits 1."""
    dirs = copy_outputs(repo, tmp_path)
    (summary,) = dirs[0].glob("PROF_*/mindstudio_profiler_output/op_summary_*.csv")
    lines = summary.read_text().splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if ",aten::addmm," in line)
    summary.write_text("".join(lines[:last] + lines[last + 1 :]))
    proc = lab(repo, "agree", *map(str, dirs), "--out", str(tmp_path / "o"))
    assert proc.returncode == 1
    assert re.search(
        r"^\[FAIL\] every forward records the same ops \(01, 23 forwards\): 1 of 19 forwards differ "
        r"from the first measured \(after 3 warm-up\) .*: forward 23: missing aten::addmm x1 \(matmul\)",
        proc.stdout,
        re.MULTILINE,
    ), proc.stdout


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"completed": False, "exit_code": 1}, "it did not run to the end (exit code 1"),
        # an older run's output: e.g. 03's build failed in this run before its run.sh wrote anything
        (
            {"run_id": "0123456789abcdef", "start": "2020-01-01T00:00:00+00:00"},
            "its output is from another run (run 01234567, started 2020-01-01T00:00:00+00:00): it did not run in this one",
        ),
        (
            {"verdicts_passed": False, "exit_code": 1, "failed_checks": ["output matches fp32 reference (01)"]},
            "its own checks failed (exit code 1): output matches fp32 reference (01)",
        ),
    ],
)
def test_agree_reports_a_failed_mode_as_fail_and_compares_the_rest(repo: Path, tmp_path: Path, changes, says) -> None:
    dirs = copy_outputs(repo, tmp_path)
    edit_info(dirs[0], **changes)
    proc = lab(repo, "agree", *map(str, dirs), "--out", str(tmp_path / "o"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(
        rf"^\[FAIL\] mode 01 ran and its own checks held \(01_cmdline\): {re.escape(says)}", proc.stdout, re.MULTILINE
    ), proc.stdout
    assert "[PASS] mode 04 ran and its own checks held" in proc.stdout  # the others are still compared
    assert "[PASS] op time vs Computing (04)" in proc.stdout
    assert "note: mode 01 failed; the checks that need it are left out" in proc.stdout


def test_agree_fails_when_op_statistic_was_tampered_with(repo: Path, tmp_path: Path) -> None:
    """04's op_statistic without its GELU rows: the integrity check names the file, the op and both numbers."""
    dirs = copy_outputs(repo, tmp_path)
    (stat,) = dirs[3].glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/op_statistic.csv")
    lines = stat.read_text().splitlines(keepends=True)
    kept = [line for line in lines if ",aten::gelu," not in line]
    assert len(kept) < len(lines)
    stat.write_text("".join(kept))
    with (stat.parent / "kernel_details.csv").open(newline="") as f:
        gelus = [row for row in csv.DictReader(f) if row["Type"] == "aten::gelu"]
    proc = lab(repo, "agree", *map(str, dirs), "--out", str(tmp_path / "o"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (line,) = [li for li in proc.stdout.splitlines() if li.startswith("[FAIL] op_statistic agrees with kernel_details")]
    assert line.endswith(
        f"aten::gelu (CPU, device host): op_statistic.csv has no row, kernel_details.csv has "
        f"{len(gelus)} tasks, {sum(float(r['Duration(us)']) for r in gelus):,.3f} us"
    )
    assert "[04]" in line


def test_agree_fails_on_a_half_written_kernel_details(repo: Path, tmp_path: Path) -> None:
    """The last rows of 04's kernel_details.csv cut (as by a copy that stopped): its op_statistic no longer agrees."""
    dirs = copy_outputs(repo, tmp_path)
    (kernels,) = dirs[3].glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv")
    lines = kernels.read_bytes().splitlines(keepends=True)
    kernels.write_bytes(b"".join(lines[:-3]))
    proc = lab(repo, "agree", *map(str, dirs), "--out", str(tmp_path / "o"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(
        r"^\[FAIL\] op_statistic agrees with kernel_details .*\[04\]: \d OP Type\(s\) disagree: aten::",
        proc.stdout,
        re.MULTILINE,
    ), proc.stdout


def test_agree_checks_the_integrity_of_every_mode(agreed) -> None:
    passed = [li for li in agreed.stdout.splitlines() if li.startswith("[PASS] op_statistic agrees with")]
    assert {re.search(r"\[(\d\d)\]:", li)[1] for li in passed} == {"01", "02", "03", "04"}, passed


def test_agree_and_compare_hand_the_analysis_records(repo: Path, agreed, tmp_path: Path) -> None:
    """agree and compare with common/analyze/ fenced off from files and models (tests/apps/analyze_guard.py; see
    test_analyze_is_pure.py): each reads the runs and computes the workload's reference before judging."""
    guard = ROOT / "tests" / "apps" / "analyze_guard.py"
    out = repo / "04_pyTorch" / "prof_out"
    for args in (["agree", "--out", str(tmp_path / "agree_out")], ["compare", str(out), str(out)]):
        proc = _sh(repo, sys.executable, str(guard), *args)
        assert (
            "functions of common/analyze/ and common/render/ fenced" in proc.stderr and "TOUCHED" not in proc.stdout
        ), proc.stdout[-800:]
        want = agreed.returncode if args[0] == "agree" else 0  # the verdicts of the unfenced run: the same exit
        assert proc.returncode == want, proc.stderr[-800:]


# --- compare ---------------------------------------------------------------------------------------
def scale_op(folder: Path, op_type: str, factor: float) -> None:
    """Make one op type ``factor`` times slower in a copy of 04's kernel_details.csv."""
    (path,) = folder.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv")
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    col, typ = rows[0].index("Duration(us)"), rows[0].index("Type")
    for row in rows[1:]:
        if row[typ] == op_type:
            row[col] = f"{float(row[col]) * factor:.3f}"
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(rows)


def test_compare_same_run_passes(repo: Path) -> None:
    out = repo / "04_pyTorch" / "prof_out"
    proc = lab(repo, "compare", str(out), str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[PASS] no regression beyond the threshold" in proc.stdout and "REGRESSION" not in proc.stdout


def test_compare_flags_a_slower_op_and_exits_1(repo: Path, tmp_path: Path) -> None:
    candidate = tmp_path / "candidate"
    shutil.copytree(repo / "04_pyTorch" / "prof_out", candidate)
    scale_op(candidate, "aten::addmm", 2.0)
    proc = lab(repo, "compare", str(repo / "04_pyTorch" / "prof_out"), str(candidate))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    flagged = [line for line in proc.stdout.splitlines() if line.rstrip().endswith("REGRESSION")]
    assert len(flagged) == 1 and "aten::addmm" in flagged[0] and "+100.0%" in flagged[0]
    assert "[FAIL] no regression beyond the threshold" in proc.stdout


def test_compare_uses_medians_over_repeated_runs(repo: Path, tmp_path: Path) -> None:
    """Three candidate runs, one of them 5x slower: the median ignores the outlier."""
    runs = tmp_path / "prof_runs"
    for i in (1, 2, 3):
        shutil.copytree(repo / "04_pyTorch" / "prof_out", runs / str(i))
    scale_op(runs / "2", "aten::addmm", 5.0)
    proc = lab(repo, "compare", str(repo / "04_pyTorch" / "prof_out"), str(runs))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "candidate: " + str(runs) + " (3 runs)" in proc.stdout


def test_compare_refuses_another_mode_or_another_workload(repo: Path, tmp_path: Path) -> None:
    proc = lab(repo, "compare", str(repo / "01_cmdline" / "prof_out"), str(repo / "04_pyTorch" / "prof_out"))
    assert proc.returncode == 2 and error_lines(proc.stderr) == [
        "Error: not the same mode: cmdline (baseline) vs pytorch (candidate) — compare runs of one mode on one backend"
    ]
    other = tmp_path / "other"
    shutil.copytree(repo / "04_pyTorch" / "prof_out", other)
    (path,) = other.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv")
    path.write_text(path.read_text().replace("32,1024", "64,1024"))
    # the same workload with other shapes (another batch): compared by family, the changed ops listed, no refusal
    proc = lab(repo, "compare", str(repo / "04_pyTorch" / "prof_out"), str(other))
    assert proc.returncode in (0, 1) and "matched by (where, op family)" in proc.stdout, proc.stderr
    assert "ops only in the candidate (added): aten::addmm [1024;64,1024;1024,1024]" in proc.stdout
    # another workload's run (its run_info.json names another model): refused, in one line
    edit_info(other, workload={"name": "another_model", "path": "/x/another_model.py", "sha256": "0" * 64})
    proc = lab(repo, "compare", str(repo / "04_pyTorch" / "prof_out"), str(other))
    assert proc.returncode == 2 and len(error_lines(proc.stderr)) == 1
    assert "Error: not the same workload: ops matching by type and shape cover 0%" in proc.stderr


# --- the HTML report, opened in a real browser -------------------------------------------------------
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def browse(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.browser
@pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (.ci/run installs it: apt-get install chromium)"
)
def test_cross_mode_html_renders_its_charts_in_chromium(repo: Path, agreed, tmp_path: Path) -> None:
    page = repo / "agree_out" / "report.html"
    text = page.read_text()
    assert not re.search(r"(src|href)=\"(https?:)?//", text), "the page must not load anything"
    dom = browse(page, tmp_path / "profile", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    charts = {
        m.group(1): m.group(0)
        for m in re.finditer(r"<svg[^>]*data-chart=\"([a-z-]+)\".*?</svg>", dom.stdout, re.DOTALL)
    }
    assert {"op-share", "steps", "pipes", "cast-variants", "cast-per-execute", "sweep"} <= set(charts), sorted(charts)
    assert charts["sweep"].count("<circle") == 2  # the two sweep points
    assert charts["op-share"].count('data-family="matmul"') == 3  # 01, 03, 04 (02 runs no MatMul)
    assert charts["steps"].count('data-part="computing"') == 5  # the 5 active steps of 04
    widths = [
        float(w) for w in re.findall(r'data-family="[a-z]+" x="[\d.]+" y="\d+" width="([\d.]+)"', charts["op-share"])
    ]
    assert widths and all(w > 0 for w in widths)
    shot = tmp_path / "shot.png"
    proc = browse(page, tmp_path / "profile2", f"--screenshot={shot}", "--window-size=1150,1800", "--hide-scrollbars")
    assert proc.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 30_000


@pytest.mark.browser
@pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is not installed (.ci/run installs it: apt-get install chromium)"
)
def test_run_html_of_04_shows_steps_and_bottlenecks(repo: Path, agreed, tmp_path: Path) -> None:
    dom = browse(repo / "04_pyTorch" / "prof_out" / "report.html", tmp_path / "profile", "--dump-dom")
    assert dom.returncode == 0
    assert 'data-chart="steps"' in dom.stdout and 'data-chart="op-share"' in dom.stdout
    assert "Bottlenecks per op" in dom.stdout and "aten::addmm" in dom.stdout


# --- bottleneck analysis in report -------------------------------------------------------------------
def test_report_rebuilds_the_runs_report_with_its_checks_and_prints_bounds_and_the_run_hint(repo: Path) -> None:
    out = repo / "04_pyTorch" / "prof_out"
    own = (out / "report.md").read_text()
    proc = lab(repo, "report", str(out))
    assert proc.returncode == 0, proc.stderr
    # The run recorded its checks in run_info.json: report.md is rebuilt with them, one name, as its help says.
    rebuilt = (out / "report.md").read_text()

    def lines(text: str, start: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith(start)]

    assert lines(rebuilt, "[") == lines(own, "[") and lines(own, "[PASS] every step records the same ops")
    assert "checks: as the run recorded them in run_info.json" in proc.stdout and "## Checks" in rebuilt
    assert f"(written to {out / 'report.md'})" in proc.stdout and not (out / "capture_report.md").exists()
    assert (out / "report.html").read_text().startswith("<!DOCTYPE html>")
    if lines(rebuilt, "peaks:") == lines(own, "peaks:"):  # the same calibration (kept: at the run's thread count)
        assert lines(rebuilt, "| aten::") == lines(own, "| aten::")  # the same figures, row for row
    assert re.search(r"^peaks: calibrated on this machine(?: now)?: copy 64 MB", proc.stdout, re.MULTILINE)
    addmm = next(li for li in proc.stdout.splitlines() if li.startswith("aten::addmm  1024;32,1024;1024,1024"))
    # 2*32*1024*1024 FLOPs; the bound is named (on a busy machine with a note that the op beat the calibrated peak)
    assert addmm.split()[4] == "0.067" and re.search(r"  (compute|memory)(;|$)", addmm.rstrip()), addmm
    assert re.search(r"^hypothesis: (host|device)-bound", proc.stdout, re.MULTILINE)
    assert re.search(r"^evidence: Computing [\d.]+ us : Free [\d.]+ us per step", proc.stdout, re.MULTILINE)


# --- the sweep -------------------------------------------------------------------------------------
def test_sweep_small_grid(repo: Path, swept, agreed) -> None:
    assert swept.returncode == 0, swept.stdout + swept.stderr
    doc = json.loads((repo / "04_pyTorch" / "prof_sweep" / "sweep.json").read_text())
    assert [(p["hidden"], p["batch"]) for p in doc["points"]] == [(64, 1), (512, 1)]
    assert doc["x"] == "hidden" and doc["workload"]["name"] == "TinyMLP" and doc["peak_gflops_per_s"] > 0
    for p in doc["points"]:
        assert 0 < p["computing_ratio"] <= 1 and abs(p["computing_us"] + p["free_us"] - p["step_us"]) < 1
        q1, q3 = p["computing_ratio_iqr"]  # steps straddling 50%: undecided, never a coin toss
        assert p["bound"] == (
            "undecided" if q1 < 0.5 <= q3 else "host-bound" if p["computing_ratio"] < 0.5 else "compute-bound"
        )
        assert p["flops"] == 2 * p["batch"] * p["hidden"] ** 2 * 4  # TinyMLP's 4 Linear layers, counted by torch
        assert p["above_peak"] == (p["gflops_per_s"] > doc["peak_gflops_per_s"])
    assert ("warning: (!)" in swept.stdout) == any(p["above_peak"] for p in doc["points"])
    assert re.search(r"^batch 1: ", swept.stdout, re.MULTILINE)
    assert 'data-chart="sweep"' in (repo / "04_pyTorch" / "prof_sweep" / "report.html").read_text()
    assert 'data-chart="sweep"' in (repo / "agree_out" / "report.html").read_text()  # the cross-mode page has it


def test_sweep_bad_sizes_one_line(repo: Path, swept) -> None:
    proc = _sh(repo, sys.executable, "-m", "common.modes.pytorch.sweep", "--hidden", "64,zero")
    assert proc.returncode == 2 and error_lines(proc.stderr) == [
        "Error: --hidden '64,zero' is not a comma-separated list of integers in 1..8192 — "
        "e.g. --hidden 64,128,256,512,1024,2048,4096"
    ]
    before = sorted(p.name for p in (repo / "04_pyTorch" / "prof_sweep").iterdir())
    proc = _sh(repo, sys.executable, "-m", "common.modes.pytorch.sweep", "--batch", "4,1,4")
    assert proc.returncode == 2 and error_lines(proc.stderr) == [
        "Error: --batch '4,1,4' names 4 more than once — give each size once: every point of the sweep is profiled once"
    ]
    assert sorted(p.name for p in (repo / "04_pyTorch" / "prof_sweep").iterdir()) == before  # the last sweep kept
