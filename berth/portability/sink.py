"""Bulk writing of rows into the tables an import fills: COPY on PostgreSQL, executemany on SQLite.

Rows are buffered per table and written a batch at a time, in the order they were given (a child
provider's row after its parent's).  A batch the database refuses is reported with the lines of the
file it came from.

An inventory's ``used`` is the sum of the allocations against it, which come later in the file.  On
PostgreSQL the inventories are copied into a temporary table and inserted with their usage once the
allocations are read (``finish``): setting it afterwards wrote every inventory row twice and left as
many dead rows behind.  On SQLite they are inserted as they come and raised by what the allocations
add, as every allocation write does.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from typing import Any, Final, cast

import psycopg
from psycopg import Copy
from psycopg.copy import QueuedLibpqWriter
from sqlalchemy import Connection

from berth.portability.format import BooksFileError

BATCH: Final = 10_000


class _Buffer:
    __slots__ = ("columns", "rows", "first_line", "last_line")

    def __init__(self, columns: tuple[str, ...]):
        self.columns = columns
        self.rows: list[tuple[Any, ...]] = []
        self.first_line = 0
        self.last_line = 0


class BulkSink:
    """Rows to insert, by table, on the transaction's connection.

    On SQLite rows are buffered and inserted a batch at a time with executemany.  On PostgreSQL each
    table's rows go into one COPY that stays open until ``flush`` (the end of the file's section),
    sent by a writer thread, so that the server stores rows while this process reads the next lines.
    """

    def __init__(self, conn: Connection):
        self._conn = conn
        self._postgres = conn.dialect.name == "postgresql"
        self._buffers: dict[str, _Buffer] = {}
        self._copies: dict[str, tuple[ExitStack, Copy, _Buffer]] = {}
        self._staged: dict[str, tuple[str, ...]] = {}  # table -> its columns, for the tables in _STAGING

    def add(self, line: int, table: str, columns: tuple[str, ...], row: tuple[Any, ...]) -> None:
        if self._postgres:
            self._copy_row(line, table, columns, row)
            return
        buffer = self._buffers.get(table)
        if buffer is None:
            buffer = self._buffers[table] = _Buffer(columns)
        if not buffer.rows:
            buffer.first_line = line
        buffer.rows.append(row)
        buffer.last_line = line
        if len(buffer.rows) >= BATCH:
            self._insert(table, buffer)

    def flush(self) -> None:
        for table, buffer in self._buffers.items():
            if buffer.rows:
                self._insert(table, buffer)
        while self._copies:
            table, (stack, _copy, lines) = self._copies.popitem()
            with self._refused(table, lines):
                stack.close()

    def abort(self, error: BaseException) -> None:
        """End every open COPY as failed (the transaction is being rolled back)."""
        while self._copies:
            _table, (stack, _copy, _lines) = self._copies.popitem()
            # The COPY reports the abort as its own error; the rollback that follows ends it all.
            with suppress(Exception):
                stack.__exit__(type(error), error, error.__traceback__)

    def _copy_row(self, line: int, table: str, columns: tuple[str, ...], row: tuple[Any, ...]) -> None:
        open_copy = self._copies.get(table)
        if open_copy is None:
            lines = _Buffer(columns)
            lines.first_line = line
            with self._refused(table, lines):
                open_copy = self._copies[table] = (*self._open_copy(table, columns), lines)
        _stack, copy, lines = open_copy
        lines.last_line = line
        try:
            copy.write_row(row)
        except self._conn.dialect.loaded_dbapi.Error:
            # As _refused words it; written out here, as entering a context per row costs more than the row.
            with self._refused(table, lines):
                raise

    def _open_copy(self, table: str, columns: tuple[str, ...]) -> tuple[ExitStack, Copy]:
        pg = cast("psycopg.Connection[Any]", self._conn.connection.dbapi_connection)
        stack = ExitStack()
        cursor = stack.enter_context(pg.cursor())
        staging = _STAGING.get(table)
        if staging is not None:
            if table not in self._staged:
                cursor.execute(f"CREATE TEMPORARY TABLE {staging} (LIKE {table} INCLUDING DEFAULTS) ON COMMIT DROP")
                self._staged[table] = columns
            table = staging
        statement = f"COPY {table} ({', '.join(columns)}) FROM STDIN"
        copy = stack.enter_context(cursor.copy(statement, writer=QueuedLibpqWriter(cursor)))
        return stack, copy

    def _insert(self, table: str, buffer: _Buffer) -> None:
        dbapi_connection = self._conn.connection.dbapi_connection
        assert dbapi_connection is not None  # held by the open connection
        marks = ", ".join("?" * len(buffer.columns))
        with self._refused(table, buffer):
            cursor = dbapi_connection.cursor()
            try:
                cursor.executemany(f"INSERT INTO {table} ({', '.join(buffer.columns)}) VALUES ({marks})", buffer.rows)
            finally:
                cursor.close()
        buffer.rows.clear()

    @contextmanager
    def _refused(self, table: str, lines: _Buffer) -> Iterator[None]:
        """A refusal of the database as the lines of the file it came from."""
        try:
            yield
        except self._conn.dialect.loaded_dbapi.Error as error:
            raise BooksFileError(
                lines.first_line,
                f"the database refused the {table} rows of lines {lines.first_line} to {lines.last_line}: {error}",
            ) from error

    def finish(self, added: dict[tuple[int, int], int], first_new_provider: int) -> None:
        """Give the inventories what the allocations ``added`` to each (provider id, class id): the
        new ones (of providers from ``first_new_provider`` on) as they are inserted, on PostgreSQL,
        and the others by raising their ``used``."""
        dbapi_connection = self._conn.connection.dbapi_connection
        assert dbapi_connection is not None  # held by the open connection
        if not self._postgres:
            cursor = dbapi_connection.cursor()
            try:
                cursor.executemany(_ADD_USED, [(used, pid, rc) for (pid, rc), used in added.items()])
            finally:
                cursor.close()
            return
        pg = cast("psycopg.Connection[Any]", dbapi_connection)
        with pg.cursor() as pg_cursor:
            pg_cursor.execute(
                "CREATE TEMPORARY TABLE import_used (resource_provider_id integer, resource_class_id integer, "
                "used bigint) ON COMMIT DROP"
            )
            with pg_cursor.copy("COPY import_used FROM STDIN") as copy:
                for (pid, rc), used in added.items():
                    copy.write_row((pid, rc, used))
            pg_cursor.execute("ANALYZE import_used")
            columns = self._staged.get("inventories")
            if columns is not None:
                pg_cursor.execute(_insert_staged_inventories(columns))
            if any(pid < first_new_provider for pid, _rc in added):
                pg_cursor.execute(_ADD_USED_FROM_TEMP, (first_new_provider,))


# Tables whose rows are copied into a temporary table first, on PostgreSQL (see the module's doc).
_STAGING: Final = {"inventories": "import_inventories"}

_ADD_USED: Final = "UPDATE inventories SET used = used + ? WHERE resource_provider_id = ? AND resource_class_id = ?"
_ADD_USED_FROM_TEMP: Final = """
UPDATE inventories i SET used = i.used + u.used FROM import_used u
WHERE i.resource_provider_id = u.resource_provider_id AND i.resource_class_id = u.resource_class_id
  AND u.resource_provider_id < %s"""


def _insert_staged_inventories(columns: tuple[str, ...]) -> str:
    # The staged rows took their ids from the inventories' own sequence (the temporary table has its
    # defaults), in the file's order, as rows copied straight in would have.
    chosen = ", ".join("s.used + COALESCE(u.used, 0)" if name == "used" else f"s.{name}" for name in columns)
    return (
        f"INSERT INTO inventories (id, {', '.join(columns)}) SELECT s.id, {chosen} FROM import_inventories s "
        "LEFT JOIN import_used u ON u.resource_provider_id = s.resource_provider_id "
        "AND u.resource_class_id = s.resource_class_id ORDER BY s.id"
    )
