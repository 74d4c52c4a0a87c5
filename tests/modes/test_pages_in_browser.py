"""The report pages opened in headless Chromium at desktop width, and measured there.

Each page (the cluster view of a real 2-rank capture and of a real 4-rank pipeline x data-parallel one, the report
of the 2-rank capture and of an msprof CLI export, the precision page of a model that overflows in fp16) is loaded
at 1366 px with a small probe script added to a copy of it; the probe writes what the layout measured into the
DOM, which ``--dump-dom`` returns: nothing runs off the page sideways (no table, chart or line wider than the
body), every text and colour key of every chart lies inside its svg (a legend whole, not clipped), no bar's label
runs under its bar, every PMU pipes chart sits under its op's label, and Integrity is the last section when its
checks hold. A screenshot of each goes to ``tests_artifacts/pages/`` (git-ignored) for a person to look at.
"""

from __future__ import annotations

import html
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import FIXTURES, ROOT, cluster_page, dir_report

from common.analyze import cluster
from common.formats.cluster import load_cluster

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
]
WIDTH = 1366  # a common laptop screen: the narrowest desktop the pages are read at
TALLEST_SHOT = 8_000  # px: a longer page is shot to here only (a 12,000 px shot takes Chromium 6 s)
ARTEFACTS = ROOT / "tests_artifacts" / "pages"
TWO_RANKS = FIXTURES / "npu" / "msinsight_torch_npu" / "text_level1"
PP2_DP2 = FIXTURES / "npu" / "megatron_pp2_dp2" / "level2"  # 4 ranks: pipeline 2 x data 2

# Runs after the page has been laid out; what it measured goes into <pre id="probe"> as JSON.
PROBE = """<script>(() => {
  const box = e => e.getBoundingClientRect(), body = box(document.body);
  const inside = (a, b) => a.left >= b.left - .5 && a.right <= b.right + .5 && a.top >= b.top - .5
                           && a.bottom <= b.bottom + .5;
  const name = e => e.tagName.toLowerCase() + ": " + (e.textContent || "").trim().slice(0, 80);
  const pipes = [...document.querySelectorAll('svg[data-chart="pipes"]')];
  const out = {
    viewport: document.documentElement.clientWidth, scroll: document.documentElement.scrollWidth,
    height: document.documentElement.scrollHeight,
    wider_than_body: [...document.querySelectorAll("table, svg.chart, p, h1, h2")]
      .filter(e => box(e).right > body.right + .5).map(name),
    outside_svg: [...document.querySelectorAll("svg.chart")].flatMap(svg => [...svg.querySelectorAll("text, rect")]
      .filter(e => !inside(box(e), box(svg))).map(e => svg.dataset.chart + " " + name(e))),
    labels_over_bars: [...document.querySelectorAll("svg.chart")].flatMap(svg => {
      const bars = Math.min(...[...svg.querySelectorAll("rect.seg")].map(r => box(r).left));
      return [...svg.querySelectorAll("text.label")].filter(t => box(t).right > bars + .5).map(name); }),
    legend_keys: document.querySelectorAll("svg.chart g.legend text").length,
    pipes: pipes.length,
    pipes_unlabelled: pipes.filter(svg => { const p = svg.previousElementSibling;
      return !(p && p.matches("p.v") && p.querySelector("b") && p.querySelector("b").textContent.trim()); }).length,
    sections: [...document.querySelectorAll("section > h2")].map(h => h.textContent),
    integrity_failed: [...document.querySelectorAll("section")].some(s => s.querySelector("h2").textContent
      === "Integrity" && s.querySelector(".fail") !== null),
  };
  const pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.append(pre);
})();</script>"""


def _chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def measure_and_shoot(page_html: str, name: str, tmp_path: Path) -> dict:
    """What the probe measured on ``page_html`` at WIDTH px; a screenshot of the page (down to TALLEST_SHOT px)
    saved as ARTEFACTS/<name>.png."""
    page = tmp_path / f"{name}.html"
    page.write_text(page_html)
    probed = tmp_path / f"{name}_probe.html"
    probed.write_text(page_html.replace("</body>", PROBE + "</body>"))
    dom = _chromium(probed, tmp_path / "profile_dom", f"--window-size={WIDTH},900", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    start = dom.stdout.index('<pre id="probe">') + len('<pre id="probe">')
    found = json.loads(html.unescape(dom.stdout[start : dom.stdout.index("</pre>", start)]))
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTEFACTS / f"{name}.png"
    height = min(found["height"], TALLEST_SHOT)
    proc = _chromium(page, tmp_path / "profile_shot", f"--window-size={WIDTH},{height}", f"--screenshot={shot}")
    assert proc.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", proc.stderr[-2000:]
    return found


def assert_readable_at_a_glance(found: dict) -> None:
    assert found["viewport"] == WIDTH and found["scroll"] <= found["viewport"], "the page scrolls sideways"
    assert found["wider_than_body"] == [], "wider than the page's body"
    assert found["outside_svg"] == [], "drawn outside its chart (clipped)"
    assert found["labels_over_bars"] == [], "a bar's label runs under its bar"
    assert found["pipes_unlabelled"] == 0, "a PMU pipes chart without its op above it"
    if "Integrity" in found["sections"]:
        where = 0 if found["integrity_failed"] else -1
        assert found["sections"][where] == "Integrity", found["sections"]


pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        CHROMIUM is None, reason="Chromium is not installed (.ci/run installs it: apt-get install chromium)"
    ),
]


# the sections each cluster page must show (title starts), beyond the steps and the per-rank means
CLUSTER_SECTIONS = {
    TWO_RANKS: ["Collectives and point-to-point ops", "Link matrix"],
    PP2_DP2: ["Collectives and point-to-point ops", "Parallel layout", "Pipeline stages"],
}


@pytest.mark.parametrize("capture", list(CLUSTER_SECTIONS), ids=lambda p: p.parent.name)
def test_cluster_page(capture: Path, tmp_path: Path) -> None:
    view = load_cluster(capture)
    found = measure_and_shoot(
        cluster_page(cluster.cluster_report(view), [cluster.check_step_sums(view)]),
        f"cluster_{capture.parent.name}_{capture.name}",
        tmp_path,
    )
    assert_readable_at_a_glance(found)
    titles = found["sections"]
    assert titles[0] == "Computing / Communication / Free per rank (median of the steps, us)"
    assert {"Per step and rank (us)", "Per rank, median of the steps (us)"} <= set(titles)
    assert [start for start in CLUSTER_SECTIONS[capture] if not any(t.startswith(start) for t in titles)] == []
    assert titles[-1] == "Checks" and found["legend_keys"] == 3  # Computing, Communication (not overlapped), Free


@pytest.mark.parametrize("capture", [TWO_RANKS, FIXTURES / "npu" / "cann85_minimal"], ids=lambda p: p.name)
def test_report_page(capture: Path, tmp_path: Path) -> None:
    found = measure_and_shoot(dir_report(capture)[2], f"report_{capture.name}", tmp_path)
    assert_readable_at_a_glance(found)
    assert found["sections"][-1].startswith("Integrity") and found["pipes"] > 0 and found["legend_keys"] > 0


def test_precision_page(tmp_path: Path, capsys) -> None:
    from common.cli.precision import run_precision

    workload = ROOT / "tests" / "apps" / "precision_fp16_overflow.py"  # fp16 overflows in its third layer
    assert run_precision("0", str(workload), str(tmp_path / "precision"), torch_only=True) == 1
    found = measure_and_shoot((tmp_path / "precision" / "report.html").read_text(), "precision_fp16_overflow", tmp_path)
    assert_readable_at_a_glance(found)
    assert found["sections"] == [
        "First divergent op per candidate",
        "How the error grows, op by op",
        "torch fp32",
        "torch fp16",
    ]
