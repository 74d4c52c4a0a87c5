"""Rendering only: every function returns text; callers print it."""

from __future__ import annotations

from common.analysis import Verdict


def render_table(header: list[str], rows: list[list[object]]) -> str:
    """A plain aligned text table (numbers right-aligned)."""
    cells = [[str(c) for c in header]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    numeric = [all(isinstance(row[i], (int, float)) for row in rows) if rows else False for i in range(len(header))]

    def line(r: list[str]) -> str:
        return "  ".join(c.rjust(w) if numeric[i] else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()

    out = [line(cells[0]), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells[1:]]
    return "\n".join(out)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 1000 else f"{value:,.1f}"
    return "N/A" if value is None else str(value)


def render_verdicts(verdicts: list[Verdict]) -> str:
    """One line per check: PASS/FAIL, its name, and the numbers it compared."""
    return "\n".join(f"[{'PASS' if v.ok else 'FAIL'}] {v.name}: {v.detail}" for v in verdicts)


def all_passed(verdicts: list[Verdict]) -> bool:
    return all(v.ok for v in verdicts)
