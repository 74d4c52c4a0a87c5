"""Rendering only: every function returns text; callers print or save it."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Iterable, Iterator, Sequence

from common.render.report import Report, Section
from common.verdict import Verdict

TOP_N = 10
STEP_ROWS = 20  # more steps than this: the step table lists the TOP_N longest, the verdict covers all


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 1000 else f"{value:,.1f}"
    return "N/A" if value is None else str(value)


MAX_WIDTH = 120  # terminal tables stay within this many columns (Markdown and HTML keep every character)
MIN_CUT_WIDTH = 12  # a text column is never cut narrower than this
ELLIPSIS = "…"
CUT_FIRST = ("Input Shapes",)  # narrowed first, down to CUT_FIRST_TO: long, and given in full in Markdown
CUT_FIRST_TO = 24
CUT_LAST = ("OP Type", "Operator", "Name")  # what a row is about: narrowed only when nothing else can be
GAP = 2


def _header_words(title: str) -> list[str]:
    """A header's words, its unit apart: "Comm Not Overlapped(us)" -> Comm / Not / Overlapped / (us)."""
    return [part for word in title.split() for part in re.split(r"(?=\()", word) if part]


def _wrap_header(title: str, width: int) -> list[str]:
    """The header on as few lines as fit ``width`` (a unit joins its word without a space)."""
    lines: list[str] = []
    for word in _header_words(title):
        sep = "" if word.startswith("(") else " "
        if lines and len(lines[-1]) + len(sep) + len(word) <= width:
            lines[-1] += sep + word
        else:
            lines.append(word)
    return lines or [""]


def _cut_order(title: str, width: int, index: int) -> int:
    """Which columns narrow first: Input Shapes (down to CUT_FIRST_TO), then the others; the first
    column (what a row is about) and op names last."""
    if title in CUT_FIRST and width > CUT_FIRST_TO:
        return 0
    return 2 if index == 0 or title in CUT_LAST else 1


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + ELLIPSIS


_BREAK_AFTER = (re.compile(r"(?<=;)"), re.compile(r"(?<=,)"))  # a shape list breaks after a ; (a shape), else a ,


def _pieces(word: str, width: int) -> list[str]:
    """A token longer than ``width`` in pieces that fit: whole shapes first, then dimensions, then characters."""
    parts = [word]
    for pattern in _BREAK_AFTER:
        parts = [q for p in parts for q in (pattern.split(p) if len(p) > width else [p]) if q]
    return [p[i : i + width] for p in parts for i in range(0, len(p), width)]


def wrap_cell(text: str, width: int) -> list[str]:
    """``text`` on lines of at most ``width``: broken at spaces, then after ``;`` and ``,`` (shape lists),
    and inside a token only when one is longer than a line; nothing is cut."""
    lines, line = [], ""
    for word in text.split():
        for k, part in enumerate(_pieces(word, width)):
            sep = " " if k == 0 and line else ""
            if len(line) + len(sep) + len(part) <= width:
                line += sep + part
            else:
                lines.append(line)
                line = part
    return [*(x for x in lines if x), line]


def render_table(
    header: list[str], rows: Iterable[Sequence[object]], max_width: int = MAX_WIDTH, wrap: tuple[str, ...] = ()
) -> str:
    """A plain aligned text table (numeric columns right-aligned), at most ``max_width`` columns wide.

    A wider table first wraps its headers onto several lines (word by word, down to the widest
    cell below them), then narrows its widest text columns one character at a time: a cell of
    words (a verdict, a list of ratios) wraps onto more lines, a cell without spaces (Input
    Shapes, an op name) is cut with an ellipsis, unless its column is in ``wrap``: those cells wrap
    (:func:`wrap_cell`), never cut. Numbers are never cut. Markdown and HTML tables show every cell in full.
    """
    return "\n".join(table_lines(header, rows, max_width, wrap))


def table_lines(
    header: list[str], rows: Iterable[Sequence[object]], max_width: int = MAX_WIDTH, wrap: tuple[str, ...] = ()
) -> Iterator[str]:
    """:func:`render_table`'s lines, one at a time. ``rows`` is read twice (the widths, then the lines), so rows
    made as they are iterated (:class:`LazyRows`: a table of every rank of thousands) are never all held."""
    n = len(header)
    data, numeric, any_rows = [0] * n, [True] * n, False
    for row in rows:
        any_rows = True
        for i in range(n):
            data[i] = max(data[i], len(_fmt(row[i])))
            numeric[i] = numeric[i] and isinstance(row[i], (int, float))
    numeric = [any_rows and x for x in numeric]
    heads = [[h] for h in header]
    widths = [max(d, len(h)) for d, h in zip(data, header)]

    def total() -> int:
        return sum(widths) + GAP * (n - 1)

    if total() > max_width:
        for i, h in enumerate(header):
            heads[i] = _wrap_header(h, max(data[i], max((len(w) for w in _header_words(h)), default=0)))
            widths[i] = max(data[i], *(len(x) for x in heads[i]))
    floor = [max(MIN_CUT_WIDTH, *(len(x) for x in heads[i])) for i in range(n)]
    while total() > max_width:
        narrowable = [i for i in range(n) if not numeric[i] and widths[i] > floor[i]]
        if not narrowable:
            break
        widths[min(narrowable, key=lambda i: (_cut_order(header[i], widths[i], i), -widths[i]))] -= 1

    def line(r: list[str]) -> str:
        return "  ".join(c.rjust(w) if numeric[i] else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()

    depth = max(len(h) for h in heads)
    yield from (line([h[k] if k < len(h) else "" for h in heads]) for k in range(depth))
    yield "  ".join("-" * w for w in widths)
    for row in rows:
        cells = [
            [c]
            if numeric[i] or len(c) <= widths[i]
            else wrap_cell(c, widths[i])
            if header[i] in wrap
            else textwrap.wrap(c, widths[i])
            if " " in c
            else [_cut(c, widths[i])]
            for i, c in enumerate(_fmt(c) for c in row)
        ]
        yield from (line([cell[k] if k < len(cell) else "" for cell in cells]) for k in range(max(map(len, cells))))


class LazyRows:
    """``count`` items made by ``make()`` each time they are iterated: a section's rows or lines over every rank of
    thousands, laid out and written without being held."""

    def __init__(self, make: Callable[[], Iterator], count: int) -> None:
        self._make, self._count = make, count

    def __iter__(self) -> Iterator:
        return iter(self._make())

    def __len__(self) -> int:
        return self._count


def render_markdown_table(header: list[str], rows: list[list[object]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def render_text(report: Report) -> str:
    return "\n".join(text_lines(report))


def text_lines(report: Report) -> Iterator[str]:
    """The report as terminal text, one line at a time (a section's rows and lines may be :class:`LazyRows`)."""
    yield from (report.title, "=" * len(report.title))
    for s in report.sections:
        if s.in_text:
            yield ""
            yield from section_lines(s)


def section_lines(s: Section) -> Iterator[str]:
    """One section as text: its title, lines, verdicts, then its table."""
    yield f"-- {s.title} --"
    yield from s.lines
    yield from (verdict_line(v) for v in s.verdicts)
    if s.header and s.rows:  # a table without rows says nothing its lines do not
        yield from table_lines(s.header, s.rows, wrap=s.wrap)


def render_markdown(report: Report) -> str:
    """The report as Markdown: what the text shows, as report.md."""
    parts = [f"# {report.title}"]
    for s in report.sections:
        if not s.in_text:
            continue
        parts += ["", f"## {s.title}", ""]
        if s.preformatted:
            parts += ["```", *s.lines, "```"]
        else:
            parts += [f"{line}  " for line in s.lines]
        parts += [f"{verdict_line(v)}  " for v in s.verdicts]
        if s.header and s.rows:
            parts += ["", render_markdown_table(s.header, s.rows)]
    return "\n".join(parts) + "\n"


def verdict_tag(v: Verdict) -> str:
    """PASS, FAIL, or N/A for a check that had nothing to compare with (never a failure)."""
    return "N/A" if not getattr(v, "applicable", True) else "PASS" if v.ok else "FAIL"


def verdict_line(v: Verdict) -> str:
    """A check's line: PASS/FAIL/N/A, its name, and the numbers it compared (or why it does not apply)."""
    return f"[{verdict_tag(v)}] {v.name}: {v.detail}"


def render_verdicts(verdicts: list[Verdict]) -> str:
    """One line per check (:func:`verdict_line`)."""
    return "\n".join(map(verdict_line, verdicts))


def run_info_line(info: dict | None) -> str:
    if info is None:
        return "backend: unknown (no run_info.json: collected outside the lab)"
    state = "complete" if info.get("completed") else "INCOMPLETE (the run did not finish; numbers are partial)"
    return (
        f"backend: {str(info['backend']).upper()} | mode {info['mode']} | device {info.get('device')} | "
        f"{info.get('start')} | {state}"
    )
