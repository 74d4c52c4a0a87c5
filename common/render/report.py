"""One report value for every report of the lab: built once per run, laid out three ways.

A :class:`Report` is a title and :class:`Section` s; a section holds prose lines, verdicts, one table and the
figures (charts) drawn from the same numbers. :mod:`common.render.text` lays a report out as terminal text and
as Markdown (``text_lines``, ``render_text``, ``render_markdown``), :mod:`common.render.html` as a page
(``report_page``). Nothing here reads a file or computes a figure: a report's builder does that, once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from common.verdict import Verdict


@dataclass(frozen=True)
class Figure:
    """A chart of a section: ``draw(*args, **kwargs)`` returns its SVG (a function of :mod:`common.render.html`
    or a renderer's own); drawn on the page only, its numbers being in the section's table or lines.
    ``label`` (in bold) and ``caption``: a line above the chart (in a grid of small charts, what each one is of)."""

    draw: Callable[..., str]
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    label: str = ""
    caption: str = ""


@dataclass
class Section:
    """A titled block: prose ``lines``, ``verdicts`` (one line each), one table (``header``, ``rows``; ``wrap``:
    columns whose wide cells wrap onto more lines, never cut) and ``figures``.

    ``preformatted``: the lines are a block printed as it is (a fenced block in Markdown, ``<pre>`` on the page).
    ``in_text`` / ``in_page``: whether the text and Markdown / the page show the section (a chart of every
    dataset at once is the page's; a line the page shows in its subtitle is the text's). ``leads``: the page
    shows the section first (a check that failed, a damaged file: the numbers below are not to be trusted); the
    text keeps it where it is, often last, where a terminal's reader looks. ``grid``: the figures side by side."""

    title: str
    lines: Sequence[str] = field(default_factory=list)
    header: list[str] = field(default_factory=list)
    rows: Sequence[Sequence[object]] = field(default_factory=list)
    wrap: tuple[str, ...] = ()
    verdicts: list[Verdict] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    preformatted: bool = False
    in_text: bool = True
    in_page: bool = True
    leads: bool = False
    grid: bool = False


@dataclass
class Report:
    """A report: its title, the sections in order, and the page's subtitle line (and title, where the page names
    the input more briefly than the text)."""

    title: str
    sections: list[Section] = field(default_factory=list)
    subtitle: str = ""
    page_title: str = ""
