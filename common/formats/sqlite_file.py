"""One SQLite file from elsewhere, opened read-only and refused in one line when it cannot be read.

Opening: read-only, and nothing is created beside the file (a profile folder stays as it was).
A database with no ``-wal`` and no ``-journal`` file beside it has every commit in the file and no
writer, so it is opened ``immutable=1`` (``file:<path>?mode=ro&immutable=1``): SQLite then takes no
lock and creates no ``-wal``/``-shm`` files, which a WAL-mode database read with ``mode=ro`` gets and
keeps after the connection closes (SQLite cannot remove them without write access). The caveat of
``immutable`` (sqlite.org/uri.html): SQLite trusts that nothing changes the file, so a file changed
while it is read could be read half-written; the file's size and modification time are compared
before and after every read, and a change is refused as "still being written". A database with a
``-wal`` or ``-journal`` beside it may have a writer, or commits only in its WAL: it is read through
``mode=ro`` with SQLite's locking, so it is read as its last committed state or refused as locked.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from common.errors import LabError

LOCK_WAIT_S = 5.0  # how long a read waits for a writer's lock before calling the file locked
SQLITE_MAGIC = b"SQLite format 3\x00"
SQLITE_HEADER_BYTES = 100


class SqliteFile:
    """One SQLite file opened read-only per query, every failure turned into one LabError."""

    def __init__(self, path: Path | str, what: str) -> None:
        self.path = Path(path)
        self.what = what

    def _check_header(self) -> None:
        """Refuse what SQLite would misread or report vaguely: not a file, empty, not SQLite, truncated.

        The header layout is SQLite's file format (sqlite.org/fileformat.html, section 1.3): the magic
        string, the page size at offset 16, and the page count at 28, valid when the change counter at
        24 equals the version-valid-for number at 92.
        """
        path = self.path
        if not path.is_file():
            raise LabError(f"{path}: file not found", "give the folder that holds the profiler's .db export")
        size = path.stat().st_size
        if size == 0:
            raise LabError(
                f"{path}: file is empty (0 bytes), not a {self.what} database",
                "the export did not finish; export the profile again",
            )
        try:
            with path.open("rb") as f:
                head = f.read(SQLITE_HEADER_BYTES)
        except OSError as err:
            raise LabError(f"{path}: cannot read ({err.strerror})", "check the file's permissions") from None
        if not head.startswith(SQLITE_MAGIC[: len(head)]) or len(head) < len(SQLITE_MAGIC):
            raise LabError(
                f"{path}: not an SQLite database (file is not a database)",
                f"give the .db that {self.what} wrote; this file is something else",
            )
        if len(head) < SQLITE_HEADER_BYTES:
            raise LabError(
                f"{path}: truncated: {size} bytes, shorter than an SQLite header",
                "the copy or the export was cut short; export or copy the profile again",
            )
        page_size = int.from_bytes(head[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        pages = int.from_bytes(head[28:32], "big")
        if pages and head[24:28] == head[92:96] and size < page_size * pages:
            raise LabError(
                f"{path}: truncated: {size:,} bytes of the {page_size * pages:,} its header declares "
                "(database disk image is malformed)",
                "the copy or the export was cut short; export or copy the profile again",
            )

    def _uri(self, immutable: bool = False) -> str:
        return self.path.resolve().as_uri() + ("?mode=ro&immutable=1" if immutable else "?mode=ro")

    def _fail(self, err: sqlite3.Error) -> LabError:
        message = str(err)
        if "locked" in message or "busy" in message:
            return LabError(
                f"{self.path}: the database is locked by another program (sqlite: {message})",
                "wait until the profiler has finished writing it, or close what holds it, then run again",
            )
        if "not a database" in message or "malformed" in message or "disk I/O" in message:
            return LabError(
                f"{self.path}: the database is damaged (sqlite: {message})", "export or copy the profile again"
            )
        return LabError(
            f"{self.path}: cannot read the database (sqlite: {message})",
            "check that the file is a complete profiler export and readable",
        )

    def _settled(self) -> bool:
        """No ``-wal`` or ``-journal`` beside the file: every commit is in it and no writer holds it."""
        folder = self.path.resolve().parent
        return not any((folder / f"{self.path.name}{suffix}").exists() for suffix in ("-wal", "-journal"))

    def _stamp(self) -> tuple[int, int]:
        stat = self.path.stat()
        return stat.st_size, stat.st_mtime_ns

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """A read-only connection, closed afterwards; sqlite errors become one LabError."""
        self._check_header()
        immutable = self._settled()
        before = self._stamp()
        try:
            conn = _guarded(sqlite3.connect(self._uri(immutable), uri=True, timeout=LOCK_WAIT_S))
        except sqlite3.Error as err:
            raise self._fail(err) from None
        with closing(conn):
            yield conn
        if immutable and self._stamp() != before:
            raise LabError(
                f"{self.path}: the database changed while it was read (still being written?)",
                "wait until the profiler has finished writing it, then run again",
            )

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self.connect() as conn:
            try:
                return conn.execute(sql, params).fetchall()
            except sqlite3.Error as err:
                raise self._fail(err) from None

    @functools.cached_property
    def schema(self) -> dict[str, list[str]]:
        """Table name -> its column names."""
        rows = self.query(
            "SELECT m.name, p.name FROM sqlite_master AS m JOIN pragma_table_info(m.name) AS p "
            "WHERE m.type = 'table' ORDER BY m.name, p.cid"
        )
        tables: dict[str, list[str]] = {}
        for table, column in rows:
            tables.setdefault(table, []).append(column)
        return tables

    def has(self, table: str, *columns: str) -> bool:
        return table in self.schema and all(c in self.schema[table] for c in columns)

    def column(self, table: str, *names: str) -> str | None:
        """The first of ``names`` that ``table`` has (versions rename columns), or None."""
        return next((n for n in names if n in self.schema.get(table, ())), None)

    def require(self, tables: dict[str, tuple[str, ...]]) -> None:
        """Stop with one line naming every missing table (or column) of what a reader needs."""
        missing = [t for t in tables if t not in self.schema]
        fix = (
            f"give the .db that {self.what} wrote; this one comes from another program, "
            "or from an export that did not finish"
        )
        if missing:
            present = sorted(self.schema)
            listed = ", ".join(present[:6]) + (", ..." if len(present) > 6 else "") if present else "none"
            raise LabError(
                f"{self.path}: not a {self.what} database: table(s) {', '.join(missing)} missing "
                f"(it has {len(present)} table(s): {listed})",
                fix,
            )
        for table, columns in tables.items():
            lacking = [c for c in columns if c not in self.schema[table]]
            if lacking:
                raise LabError(
                    f"{self.path}: table {table} lacks column(s) {', '.join(lacking)}: "
                    f"not a {self.what} database this lab can read",
                    fix,
                )


def _guarded(conn: sqlite3.Connection) -> sqlite3.Connection:
    """A file from elsewhere is data, not code: no schema-defined functions, no writes at all."""
    conn.execute("PRAGMA trusted_schema = OFF")
    conn.execute("PRAGMA query_only = ON")
    return conn
