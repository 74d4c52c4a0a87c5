"""One report pipeline: every report is a Report value, laid out as text, Markdown and a page by render/ alone."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from helpers import FIXTURES, ROOT, laid_out

from common.analyze.advisor.rules import Advisor
from common.formats.advice_input import iter_capture_inputs
from common.modes.reports import directory_report
from common.render.advice import advice_report
from common.render.report import Figure, Report, Section
from common.verdict import Verdict

CAPTURE = FIXTURES / "npu" / "msinsight_torch_npu" / "text_level1"
LAYOUT = ("render/html.py", "render/text.py")  # the only modules that write markup or Markdown syntax


def _text_titles(text: str) -> list[str]:
    return re.findall(r"^-- (.*) --$", text, flags=re.M)


def _md_titles(markdown: str) -> list[str]:
    return re.findall(r"^## (.*)$", markdown, flags=re.M)


def _page_titles(page: str) -> list[str]:
    return re.findall(r"<h2>(.*?)</h2>", page)


def test_one_report_value_is_laid_out_three_ways() -> None:
    drawn: list[str] = []

    def draw(name: str) -> str:
        drawn.append(name)
        return f'<svg data-chart="{name}"></svg>'

    report = Report(
        "a report",
        [
            Section(
                "numbers",
                lines=["a line"],
                header=["op", "us"],
                rows=[["Add", 1.5]],
                verdicts=[Verdict("c", True, "held")],
            ),
            Section("a chart", figures=[Figure(draw, ("bars",), label="Add", caption=" (2 tasks)")], in_text=False),
            Section("text only", lines=["said in the page's subtitle"], in_page=False),
            Section("as printed", lines=["  kept  as  is"], preformatted=True),
            Section("integrity", verdicts=[Verdict("files agree", False, "they do not")], leads=True),
        ],
        subtitle="the run",
    )
    text, markdown, page = laid_out(report)
    assert drawn == ["bars"]  # drawn once, for the page only
    assert _text_titles(text) == _md_titles(markdown) == ["numbers", "text only", "as printed", "integrity"]
    assert _page_titles(page) == ["integrity", "numbers", "a chart", "as printed"]  # a failed check leads the page
    assert "[FAIL] files agree: they do not" in text and "[FAIL] files agree: they do not  " in markdown
    assert '<span class="fail">[FAIL]</span> <b>files agree</b>' in page and '<p class="sub">the run</p>' in page
    assert (
        "\n  kept  as  is\n" in text and "```\n  kept  as  is\n```" in markdown and "<pre>  kept  as  is</pre>" in page
    )
    assert "| Add | 1.500 |" in markdown and re.search(r"^Add\s+1\.500$", text, flags=re.M) and "<td>Add</td>" in page
    assert '<p class="v"><b>Add</b> (2 tasks)</p><svg data-chart="bars">' in page


def test_a_real_capture_tells_one_story_in_every_layout() -> None:
    report, _ = directory_report(CAPTURE, bottlenecks=False)
    text, markdown, page = laid_out(report)
    titles = _text_titles(text)
    assert titles == _md_titles(markdown) and len(titles) > 10
    page_only = [s.title for s in report.sections if not s.in_text]
    assert [t for t in _page_titles(page) if t not in page_only] == titles  # nothing held (integrity leads)
    advisor = Advisor()
    for rank in iter_capture_inputs(CAPTURE):
        advisor.add(rank)
    text, markdown, page = laid_out(advice_report("advise", ["2 exports"], advisor.findings()))
    assert _text_titles(text) == _md_titles(markdown) == _page_titles(page)


def _markup_in(path: Path, root: Path = ROOT) -> list[str]:
    """Each string constant of ``path`` holding markup or Markdown syntax, and each call of a ``page`` method."""
    found, tree = [], ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if re.search(r"<(section|h1|h2|pre|table)\b|^#{1,3} |```", node.value):
                found.append(f"{path.relative_to(root)}:{node.lineno}: {node.value[:40]!r}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "page":
            found.append(f"{path.relative_to(root)}:{node.lineno}: a page made outside render/html.py")
    return found


def test_no_report_is_laid_out_outside_the_pipeline() -> None:
    """Markup and Markdown syntax live in render/html.py and render/text.py: every other module builds a Report."""
    common = ROOT / "common"
    found = [
        hit
        for path in sorted(common.rglob("*.py"))
        if path.relative_to(common).as_posix() not in LAYOUT
        for hit in _markup_in(path)
    ]
    assert found == []


def test_the_fence_finds_a_page_made_by_hand(tmp_path: Path) -> None:
    """Control: the scan above names a module that writes its own heading and calls html.page."""
    module = tmp_path / "control.py"
    module.write_text('from common.render import html\n\n\ndef f():\n    return html.page("t", "", ["<h2>x</h2>"])\n')
    assert len(_markup_in(module, tmp_path)) == 2
