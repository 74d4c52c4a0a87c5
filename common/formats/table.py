"""Lenient, strict-where-it-matters CSV reading for msprof and torch_npu files, on polars.

The file is parsed by polars in blocks of whole lines (``BLOCK_BYTES``), only the columns a
caller asks for are kept, and cells stay strings until a caller asks for numbers, so a
million-row ``op_summary`` is read in about a second with bounded memory (the block, not the
file). Slow, exact Python scanning runs only on the rare rows that need it and to name the
line of an error.

Lenient: trailing TABs and stray quotes are stripped, ``N/A``/``NA``/empty read as missing,
a UTF-8 BOM and CRLF are accepted, alias column names (Block Num/Block Dim) resolve, blank
lines and trailing empty cells (msprof op's trailing comma) are ignored.
Strict: a missing, empty or non-UTF-8 file, a missing or duplicated column, a row with too
few or too many fields, broken quoting, and a non-number, NaN/inf, negative time or
fractional count in a numeric column stop with one line naming the file, the line and the
column. One limit: a file cut off inside its very last cell (no newline after it) cannot be
told from a complete one; msprof always ends its last line with a newline.
"""

from __future__ import annotations

import codecs
import csv
import io
import math
import mmap
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from common.errors import LabError
from common.formats.engine import pl
from common.formats.schema import ALIASES

MISSING = ["", "N/A", "NA", "n/a", "None"]
BLOCK_BYTES = 8 << 20  # polars parses this much at a time: the memory bound of a read
_MAX_PENDING = 4 * BLOCK_BYTES  # a quoted field longer than this is taken as broken quoting
_DECORATION = ' \t\r\n"'  # msprof's trailing TAB after timestamps, kept quotes, whitespace
_DAMAGED = "the file is truncated or damaged; re-export it"
csv.field_size_limit(sys.maxsize)  # the exact scanner must accept any field polars accepts


def clean(text: str) -> str:
    """A cell without msprof's decorations: whitespace, the trailing TAB and kept quotes."""
    return text.strip(_DECORATION)


def line_at(path: Path, offset: int) -> int:
    """The 1-based line of a file that byte ``offset`` falls on (error paths only)."""
    line = 1
    with path.open("rb") as f:
        while offset > 0:
            data = f.read(min(offset, BLOCK_BYTES))
            if not data:
                break
            line += data.count(b"\n")
            offset -= len(data)
    return line


class CsvFile:
    """One CSV file: its header, read once, and its data rows, read block by block in polars."""

    def __init__(self, path: Path | str, writer: str) -> None:
        self.path = Path(path)
        self.writer = writer
        if not self.path.is_file():
            raise LabError(f"{self.path}: file not found", f"run the mode that writes it ({writer})")
        with self.path.open("rb") as f:
            raw = f.readline()
            self.data_offset = f.tell()
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            raise LabError(f"{self.path}:1: not UTF-8 text ({_bad_byte(raw, err)})", _DAMAGED) from None
        if not text.strip():
            raise LabError(f"{self.path}: file is empty", f"re-run the collection ({writer})")
        try:
            header = [clean(c) for c in next(csv.reader([text], strict=True))]
        except csv.Error as err:
            raise LabError(f"{self.path}:1: header is not CSV ({err})", _DAMAGED) from None
        while header and header[-1] == "":  # msprof op ends every line with a comma
            header.pop()
        seen: dict[str, int] = {}
        for i, name in enumerate(header):
            if name and name in seen:
                raise LabError(
                    f"{self.path}:1: column {name!r} appears twice (fields {seen[name] + 1} and {i + 1})",
                    "the header is damaged; re-export the file",
                )
            seen[name] = i
        self.header = header
        self._index = seen

    def index(self, column: str) -> int | None:
        """Position of ``column`` (or one of its aliases) in the header."""
        for name in (column, *ALIASES.get(column, ())):
            if name in self._index:
                return self._index[name]
        return None

    def require(self, columns: list[str]) -> None:
        missing = [c for c in columns if self.index(c) is None]
        if missing and len(self.header) == 1 and (sep := next((c for c in ";\t|" if c in self.header[0]), None)):
            raise LabError(
                f"{self.path}:1: the header is one column holding {sep!r}: not comma-separated",
                f"msprof and torch_npu write commas; expected the file {self.writer} writes",
            )
        if missing:
            raise LabError(
                f"{self.path}: column {', '.join(repr(c) for c in missing)} missing (header has {len(self.header)} columns)",
                f"expected the file {self.writer} writes; re-export it or check the version",
            )

    # --- data ------------------------------------------------------------------------------------
    def blocks(self, columns: list[str], clean: bool = True) -> Iterator[pl.DataFrame]:
        """String cells of ``columns`` (those present), block by block; ``clean``: stripped, None = missing.

        Uncleaned blocks let an aggregation group on raw text and clean only the few group keys.

        Each frame also has ``__record``, the 0-based data record it came from, for error lines.
        """
        width = len(self.header)
        wanted = sorted({i for c in columns if (i := self.index(c)) is not None})
        # One field past the header catches rows with too many fields; the last field, rows with too few.
        probe = sorted({*wanted, width - 1, width})
        names = {i: f"f{i}" for i in range(width + 1)}
        # A first line of width + 1 empty fields makes polars allocate that many columns.
        lead = b"," * width + b"\n"
        record = 0
        for offset, chunk in self._chunks(lead):
            try:
                frame = pl.read_csv(
                    chunk,
                    has_header=False,
                    schema={names[i]: pl.String for i in range(width + 1)},
                    columns=probe,
                    empty_string_is_null=False,
                    quote_char='"',
                )[1:]
            except pl.exceptions.PolarsError as err:
                self._diagnose(chunk[len(lead) :], offset, err)  # raises the exact error
                raise  # unreachable: _diagnose always raises
            suspect = frame.select(
                ((pl.col(names[width - 1]) == "") | (pl.col(names[width]) != "")).arg_true()
            ).to_series()
            blank = self._check_rows(chunk[len(lead) :], offset, set(suspect.to_list())) if len(suspect) else set()
            out = frame.select(
                [(cleaned(pl.col(names[i])) if clean else pl.col(names[i])).alias(self.header[i]) for i in wanted]
            ).with_columns(__record=pl.int_range(record, record + frame.height, dtype=pl.Int64))
            if blank:
                out = out.filter(~pl.int_range(pl.len()).is_in(sorted(blank)))
            record += frame.height
            yield out

    def _chunks(self, lead: bytes = b"", block_bytes: int | None = None) -> Iterator[tuple[int, bytes]]:
        """(file offset, ``lead`` + bytes) of whole lines, never cutting inside a quoted field."""
        block_bytes = block_bytes or BLOCK_BYTES
        offset, size = self.data_offset, block_bytes
        with self.path.open("rb") as f:
            while True:
                f.seek(offset)
                block = f.read(size)
                if not block:
                    return
                cut = len(block)
                if len(block) == size:  # not at the end: cut after the last newline outside quotes
                    cut = block.rfind(b"\n") + 1
                    quotes = _quotes(block, 0, cut)
                    while cut and quotes % 2:
                        earlier = block.rfind(b"\n", 0, cut - 1) + 1
                        quotes -= _quotes(block, earlier, cut)
                        cut = earlier
                    if not cut:
                        if size < max(
                            _MAX_PENDING, 4 * block_bytes
                        ):  # one quoted field or line longer than a block: read more
                            size *= 2
                            continue
                        cut = block.rfind(b"\n") + 1 or len(block)  # broken quoting: polars will say where
                yield offset, (b"".join((lead, memoryview(block)[:cut])) if lead or cut < len(block) else block)
                offset += cut
                size = block_bytes

    def large_chunks(self, block_bytes: int) -> Iterator[tuple[int, bytes]]:
        """(file offset, bytes) of whole lines in blocks of about ``block_bytes``, cut after a newline.

        For the fast aggregation. The cut is not checked against quoting: a cut inside a quoted
        field that holds a newline leaves an open quote at the end of one block and a stray one at
        the start of the next, which polars refuses or reads as a row with too few fields, and the
        fast pass gives up on both (the exact reader then reads the file, quotes and all). The cut
        is found on a read-only map of the file (pages dropped once passed, so the map never holds
        the file) and each block is read once, exactly. A record longer than a block widens it.
        """
        size = self.path.stat().st_size
        if size <= self.data_offset:
            return
        with self.path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            offset, want = self.data_offset, block_bytes
            while offset < size:
                end = min(offset + want, size)
                if end < size:
                    cut = mm.rfind(b"\n", offset, end) + 1
                    if cut <= offset:  # a record longer than the block: look further
                        want *= 2
                        continue
                    end = cut
                yield offset, os.pread(f.fileno(), end - offset, offset)
                _drop(mm, offset, end)
                offset, want = end, block_bytes

    def _records(self, chunk: bytes, offset: int) -> Iterator[tuple[int, list[str]]]:
        """(file line, cells) of each record of a chunk, exactly as Python's csv module reads them."""
        start = line_at(self.path, offset)
        text = chunk.decode("utf-8")
        reader = csv.reader(io.StringIO(text, newline=""), strict=True)
        while True:
            first = start + reader.line_num  # the line this record starts on
            try:
                cells = next(reader)
            except StopIteration:
                return
            except csv.Error as err:
                raise LabError(f"{self.path}:{first}: {err}", _DAMAGED) from None
            yield first, cells

    def _check_rows(self, chunk: bytes, offset: int, suspects: set[int]) -> set[int]:
        """Check the rows with an empty last or a non-empty extra field; return the blank ones."""
        blank = set()
        last = max(suspects)
        for i, (line, cells) in enumerate(self._records(chunk, offset)):
            if i in suspects:
                if not any(c.strip() for c in cells):
                    blank.add(i)
                else:
                    self._check_width(cells, line)
            if i >= last:
                break
        return blank

    def _check_width(self, cells: list[str], line: int) -> None:
        n = len(cells)
        while n > len(self.header) and cells[n - 1].strip() == "":
            n -= 1
        if n != len(self.header):
            raise LabError(f"{self.path}:{line}: {n} fields where the header has {len(self.header)}", _DAMAGED)

    def _diagnose(self, chunk: bytes, offset: int, err: Exception) -> None:
        """polars refused a chunk: find and raise the exact problem (line, column)."""
        try:
            chunk.decode("utf-8")
        except UnicodeDecodeError as bad:
            line = line_at(self.path, offset) + chunk.count(b"\n", 0, bad.start)
            raise LabError(f"{self.path}:{line}: not UTF-8 text ({_bad_byte(chunk, bad)})", _DAMAGED) from None
        for line, cells in self._records(chunk, offset):
            if any(c.strip() for c in cells):
                self._check_width(cells, line)
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise LabError(f"{self.path}:{line_at(self.path, offset)}: not readable as CSV ({first})", _DAMAGED)

    def line_of(self, record: int) -> int:
        """The file line where data record ``record`` (0-based) starts (error path only)."""
        seen, line = 0, 2
        for offset, chunk in self._chunks():
            for line, _ in self._records(chunk, offset):
                if seen == record:
                    return line
                seen += 1
        return line


def _drop(mm: mmap.mmap, start: int, end: int) -> None:
    """Let the kernel drop the map's pages of [start, end) from this process (they stay in the page cache)."""
    page = mmap.PAGESIZE
    first = start - start % page
    if hasattr(mm, "madvise") and end > first:
        try:
            mm.madvise(mmap.MADV_DONTNEED, first, end - first)
        except (OSError, ValueError):
            pass


def _quotes(data: bytes, start: int, end: int) -> int:
    return data.count(b'"', start, end)


def cleaned(text: pl.Expr) -> pl.Expr:
    """:func:`clean` for a column, with msprof's missing markers as None."""
    text = text.str.strip_chars(_DECORATION)
    return pl.when(text.is_in(MISSING)).then(None).otherwise(text)


def _bad_byte(data: bytes, err: UnicodeDecodeError) -> str:
    line_start = data.rfind(b"\n", 0, err.start) + 1
    column = len(codecs.decode(data[line_start : err.start], "utf-8", "replace")) + 1
    return f"byte 0x{data[err.start]:02x} at column {column}"


@dataclass
class Table:
    """Cleaned string cells of one CSV file (None = missing), with typed, checked accessors."""

    file: CsvFile
    frame: pl.DataFrame

    @property
    def path(self) -> Path:
        return self.file.path

    @property
    def header(self) -> list[str]:
        return self.file.header

    def __len__(self) -> int:
        return self.frame.height

    def name(self, column: str) -> str | None:
        i = self.file.index(column)
        return None if i is None or self.header[i] not in self.frame.columns else self.header[i]

    def has(self, column: str) -> bool:
        return self.name(column) is not None

    def strings(self, column: str) -> pl.Series:
        """One column's cleaned text (all None when the file lacks it)."""
        name = self.name(column)
        return self.frame[name] if name else pl.Series(column, [None] * len(self), dtype=pl.String)

    def numbers(
        self, column: str, *, required: bool = False, integer: bool = False, minimum: float | None = None
    ) -> pl.Series:
        """One column as finite floats (None = missing); anything else stops with file, line and column."""
        return checked_numbers(self.file, self.frame, column, required=required, integer=integer, minimum=minimum)

    def text(self, row: int, column: str) -> str | None:
        return self.strings(column)[row]

    def number(self, row: int, column: str) -> float | None:
        return self.numbers(column)[row]


def checked_numbers(
    file: CsvFile,
    frame: pl.DataFrame,
    column: str,
    *,
    required: bool = False,
    integer: bool = False,
    minimum: float | None = None,
) -> pl.Series:
    """``column`` of a block as Float64, every non-number, NaN/inf, negative or fractional value an error."""
    i = file.index(column)
    name = None if i is None else file.header[i]
    if name is None or name not in frame.columns:
        if required:
            file.require([column])
        return pl.Series(column, [None] * frame.height, dtype=pl.Float64)
    text = frame[name]
    values = text.cast(pl.Float64, strict=False)
    if values.null_count() > text.null_count():  # decorated or missing cells: clean, then parse
        text = frame.select(cleaned(pl.col(name))).to_series()
        values = text.cast(pl.Float64, strict=False)
    if _all_good(text, values, required, integer, minimum):  # the usual case, in a few whole-column operations
        return values.alias(column)
    problems = [
        (values.is_null() & text.is_not_null(), "not a number"),
        (values.is_nan() | values.is_infinite(), "not a number"),
    ]
    if required:
        problems.append((text.is_null(), None))
    if minimum is not None:
        problems.append((values < minimum, f"below {minimum:g}"))
    if integer:
        problems.append((values != values.floor(), "not a whole number"))
    frame_of = pl.DataFrame([mask.fill_null(False).alias(str(k)) for k, (mask, _) in enumerate(problems)])
    if not frame_of.select(pl.any_horizontal(pl.all()).any()).item():
        return values.alias(column)
    for k, (_, what) in enumerate(problems):
        bad = frame_of[str(k)].arg_true()
        if len(bad):
            row = int(bad[0])
            line = file.line_of(int(frame["__record"][row]))
            if what is None:
                raise LabError(
                    f"{file.path}:{line}: column {column!r} is empty",
                    "the file is damaged or from a collection without this data",
                )
            raise LabError(f"{file.path}:{line}: column {column!r} holds {text[row]!r}, {what}", _DAMAGED)
    return values.alias(column)


def _all_good(text: pl.Series, values: pl.Series, required: bool, integer: bool, minimum: float | None) -> bool:
    """Whether no cell breaks a rule of :func:`checked_numbers`; counts and extremes only, no row masks.

    A cast leaves a cell missing exactly when its text is missing or not a number, so equal missing
    counts mean every present cell parsed; ``is_finite`` is missing for missing cells, which ``all`` skips.
    """
    if values.null_count() > text.null_count() or (required and text.null_count()):
        return False
    present = values.drop_nulls()
    if not len(present):
        return True
    if not present.is_finite().all() or (minimum is not None and present.min() < minimum):
        return False
    return not integer or bool((present == present.floor()).all())


def read_table(path: Path | str, required: list[str], writer: str, columns: list[str] | None = None) -> Table:
    """Read one CSV file; ``required`` columns must be present, ``writer`` names who writes it.

    ``columns`` limits what is kept (all columns by default); the whole file is still checked.
    """
    file = CsvFile(path, writer)
    file.require(required)
    wanted = file.header if columns is None else [*required, *columns]
    frames = list(file.blocks(wanted))
    if not frames:  # a header and no rows
        kept = dict.fromkeys(file.header[i] for i in (file.index(c) for c in wanted) if i is not None)
        frames = [pl.DataFrame(schema={**dict.fromkeys(kept, pl.String), "__record": pl.Int64})]
    return Table(file, pl.concat(frames))


def finite_number(value: object, path: Path, where: str, fix: str) -> float:
    """``value`` as a finite float, or one LabError naming the file, the place and the value."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise LabError(f"{path}: {where} is {value!r}, not a number", fix)
    return number


def rows_or_error(path: Path | str, required: list[str], writer: str) -> int | str:
    """How many rows ``path`` holds, read as :func:`read_table` reads it, or ``error: <why>`` when it cannot be."""
    try:
        return len(read_table(path, required, writer))
    except LabError as err:
        return f"error: {err}"
