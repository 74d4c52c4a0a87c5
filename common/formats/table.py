"""Lenient, strict-where-it-matters CSV reading for msprof and torch_npu files.

Lenient: trailing TABs and stray quotes are stripped, ``N/A``/``NA``/empty read as missing,
a UTF-8 BOM and CRLF are accepted, alias column names (Block Num/Block Dim) resolve.
Strict: a missing or empty file, a missing column, a short row or a non-number in a
numeric column stops with one line naming the file, the line and the column.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from common.errors import LabError
from common.formats.schema import ALIASES

_MISSING = {"", "N/A", "NA", "n/a", "None"}


def clean(text: str) -> str:
    """A cell without msprof's decorations: whitespace, the trailing TAB and kept quotes."""
    return text.strip().strip('"').strip()


@dataclass
class Table:
    """A parsed CSV: header, rows of cleaned strings, and where each row came from."""

    path: Path
    header: list[str]
    rows: list[list[str]]
    lines: list[int]  # 1-based file line of each row, for error messages

    def index(self, column: str) -> int | None:
        for name in (column, *ALIASES.get(column, ())):
            if name in self.header:
                return self.header.index(name)
        return None

    def require(self, columns: list[str], writer: str) -> None:
        missing = [c for c in columns if self.index(c) is None]
        if missing:
            raise LabError(
                f"{self.path}: column {', '.join(repr(c) for c in missing)} missing (header has {len(self.header)} columns)",
                f"expected the file {writer} writes; re-export it or check the version",
            )

    def has(self, column: str) -> bool:
        return self.index(column) is not None

    def text(self, row: int, column: str) -> str | None:
        i = self.index(column)
        if i is None:
            return None
        value = self.rows[row][i]
        return None if value in _MISSING else value

    def number(self, row: int, column: str) -> float | None:
        """A numeric cell; missing is None, anything else that is not a finite number is an error."""
        value = self.text(row, column)
        if value is None:
            return None
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise LabError(
                f"{self.path}:{self.lines[row]}: column {column!r} holds {value!r}, not a number",
                "the file is damaged; re-export it",
            )
        return number

    def required_number(self, row: int, column: str) -> float:
        number = self.number(row, column)
        if number is None:
            raise LabError(
                f"{self.path}:{self.lines[row]}: column {column!r} is empty",
                "the file is damaged or from a collection without this data",
            )
        return number


def read_table(path: Path | str, required: list[str], writer: str) -> Table:
    """Read one CSV file; ``required`` columns must be present, ``writer`` names who writes it."""
    path = Path(path)
    if not path.is_file():
        raise LabError(f"{path}: file not found", f"run the mode that writes it ({writer})")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise LabError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})", "the file is damaged") from None
    reader = csv.reader(text.splitlines())
    try:
        header = [clean(c) for c in next(reader)]
    except StopIteration:
        raise LabError(f"{path}: file is empty", f"re-run the collection ({writer})") from None
    while header and header[-1] == "":  # msprof op ends every line with a comma
        header.pop()
    rows, lines = [], []
    for row in reader:
        if not any(cell.strip() for cell in row):
            continue
        cells = [clean(c) for c in row]
        while len(cells) > len(header) and cells[-1] == "":
            cells.pop()
        if len(cells) != len(header):
            raise LabError(
                f"{path}:{reader.line_num}: {len(cells)} fields where the header has {len(header)}",
                "the file is truncated or damaged; re-export it",
            )
        rows.append(cells)
        lines.append(reader.line_num)
    table = Table(path, header, rows, lines)
    table.require(required, writer)
    return table
