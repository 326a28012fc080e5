"""Plain SQL on the transaction's own DBAPI connection, for the hottest paths.

Building and caching a SQLAlchemy statement costs a few hundred microseconds of Python per query,
and running even a prebuilt one costs tens: on a provider or allocation write, or a candidate search,
that was most of the request.  These helpers send fixed SQL text straight to the driver instead,
inside the same transaction.  SQL is written once with ``?`` placeholders and ``{ids}`` markers for
one list of values (after the other parameters, repeated for each marker); it is translated for
psycopg (``%s``, ``= ANY(%s)``) on first use.

Driver errors are raised as SQLAlchemy's exceptions (``IntegrityError``, ``OperationalError`` ...)
and a lost connection is invalidated, exactly as if SQLAlchemy had run the statement, so that the
transaction retry in ``berth.store.database`` and the callers' ``except`` clauses see no difference.

Timestamps are stored as SQLAlchemy stores them: native on PostgreSQL, on SQLite as text in
SQLAlchemy's format (``db_time`` writes it, ``py_time`` reads it back).
"""

from __future__ import annotations

import datetime
import itertools
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from sqlalchemy import Connection
from sqlalchemy.engine.interfaces import DBAPICursor

from berth.sql.driver import driver_cursor, driver_error

if TYPE_CHECKING:
    import psycopg

# A row as the driver returns it: its columns' values, of whatever types the statement selects.
Row: TypeAlias = tuple[Any, ...]
# Parameters of a statement (or, for ``execute_many``, of each of its runs).
Params: TypeAlias = Sequence[Any]


def _is_postgres(conn: Connection) -> bool:
    return conn.dialect.name == "postgresql"


@lru_cache(maxsize=512)
def translate(sql: str, postgres: bool, id_count: int, integer_ids: bool = False) -> str:
    if postgres:
        sql = sql.replace("%", "%%").replace("?", "%s")
        # psycopg sends a list of small numbers as smallint[]; compared with an integer column, the
        # cross-type operator keeps PostgreSQL from hashing the array, and each row is then checked
        # against every element in turn (loading 1,000 trees: 7.0 ms of execution instead of 2.5).
        return sql.replace("IN {ids}", "= ANY(%s::integer[])" if integer_ids else "= ANY(%s)")
    return sql.replace("{ids}", "(" + ",".join("?" * id_count) + ")" if id_count else "(NULL)")


def values_rows(row: str, count: int, no_rows: str) -> str:
    """``VALUES row, row, ...`` with ``count`` rows of placeholders, or ``no_rows`` (a SELECT that
    returns none, with the same column types) when there are none, which VALUES cannot express."""
    return "VALUES " + ", ".join([row] * count) if count else no_rows


_LONGEST_PREPARED_LIST = 32


def _cursor(conn: Connection, sql: str, params: Params, ids: Iterable[Any] | None, many: bool = False) -> DBAPICursor:
    postgres = _is_postgres(conn)
    id_list = None if ids is None else list(ids)
    if not many:
        params = list(params)
        if id_list is not None:
            for _ in range(sql.count("{ids}")):
                if postgres:
                    params.append(id_list)
                else:
                    params.extend(id_list)
    if postgres:
        text = translate(sql, True, 0, bool(id_list and isinstance(id_list[0], int)))
    else:
        text = translate(sql, False, 0 if id_list is None else len(id_list))
    cursor = driver_cursor(conn, text, params)
    try:
        if many:
            cursor.executemany(text, params)
        elif postgres and id_list is not None and len(id_list) > _LONGEST_PREPARED_LIST:
            # Planned for this very list: psycopg prepares a statement after a few runs, and
            # PostgreSQL may then keep one generic plan for every list length, chosen while the
            # lists were short (or the tables not yet analysed).  On a freshly loaded database that
            # plan made 1,000 trees cost 24 ms to load instead of 9.
            cast("psycopg.Cursor[Any]", cursor).execute(text, params, prepare=False)
        else:
            cursor.execute(text, params)
    except conn.dialect.loaded_dbapi.Error as error:
        wrapped = driver_error(conn, error, text, params, cursor)
        cursor.close()
        raise wrapped from error
    except BaseException:
        cursor.close()
        raise
    return cursor


def fetch(conn: Connection, sql: str, params: Params = (), ids: Iterable[Any] | None = None) -> Sequence[Row]:
    """Rows of ``sql``; ``ids`` fills each of its ``IN {ids}`` lists (after the other parameters)."""
    cursor = _cursor(conn, sql, params, ids)
    try:
        return cursor.fetchall()
    finally:
        cursor.close()


def fetch_dicts(
    conn: Connection, sql: str, params: Params = (), ids: Iterable[Any] | None = None
) -> list[dict[str, Any]]:
    """Rows of ``sql`` as dicts keyed by column name (or label)."""
    cursor = _cursor(conn, sql, params, ids)
    try:
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        cursor.close()


def fetch_records(
    conn: Connection, sql: str, params: Params = (), ids: Iterable[Any] | None = None
) -> list[dict[str, Any]]:
    """``fetch_dicts`` for rows of a table with timestamps: ``created_at`` and ``updated_at`` come
    back as datetimes whichever database stored them."""
    rows = fetch_dicts(conn, sql, params, ids)
    for row in rows:
        row["created_at"] = py_time(row["created_at"])
        row["updated_at"] = py_time(row["updated_at"])
    return rows


def fetch_value(conn: Connection, sql: str, params: Params = ()) -> Any:
    """The first column of the first row, or None when there is no row."""
    cursor = _cursor(conn, sql, params, None)
    try:
        row = cursor.fetchone()
        return None if row is None else row[0]
    finally:
        cursor.close()


def execute(conn: Connection, sql: str, params: Params = (), ids: Iterable[Any] | None = None) -> int:
    """Run a statement that changes rows; the number of rows it changed."""
    cursor = _cursor(conn, sql, params, ids)
    try:
        return cursor.rowcount
    finally:
        cursor.close()


def execute_script(conn: Connection, sql: str) -> None:
    """PostgreSQL: statements without parameters, sent as they are, in one simple query (one round
    trip for all of them)."""
    cursor = driver_cursor(conn, sql)
    try:
        cursor.execute(sql)
    except conn.dialect.loaded_dbapi.Error as error:
        raise driver_error(conn, error, sql, (), cursor) from error
    finally:
        cursor.close()


def execute_many(conn: Connection, sql: str, rows: Sequence[Params]) -> None:
    """Run ``sql`` once per parameter tuple in ``rows``."""
    if rows:
        _cursor(conn, sql, rows, None, many=True).close()


# Rows per multi-row INSERT: with a claim's handful of columns each, far below PostgreSQL's limit of
# 65,535 parameters a statement; on SQLite as many as its own limit allows (32,766 from 3.32 on).
_ROWS_PER_INSERT = 1000


def _rows_per_insert(conn: Connection, row: str) -> int:
    if _is_postgres(conn):
        return _ROWS_PER_INSERT
    dbapi_connection = cast(sqlite3.Connection, conn.connection.dbapi_connection)
    most_parameters = dbapi_connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    return max(1, min(_ROWS_PER_INSERT, most_parameters // max(1, row.count("?"))))


def insert_rows(conn: Connection, head: str, row: str, rows: Sequence[Params], tail: str = "") -> None:
    """``head`` (``INSERT INTO table (columns)``) with each of ``rows`` as a row of its values, ``row``
    their placeholders (``(?, ?, ?)``), and ``tail`` after them (``ON CONFLICT …``; no two rows of
    one call may conflict with each other).

    One statement for up to ``_ROWS_PER_INSERT`` rows. On PostgreSQL: one round trip, and one run of
    the table's statement-level triggers (the quota counters', which hold the project's counter rows
    from there to the commit), where a run per row costs both per row. On SQLite, whose triggers run
    per row anyway, it still costs less than a run of a prepared statement per row: its writes hold
    every other writer back, and a gang of 100 wrote its 300 allocation rows and 100 consumers that
    way (gangs of 100 at 10,000 hosts placed 8 % more a second; docs/performance.md).
    """
    if not rows:
        return
    per_insert = _rows_per_insert(conn, row)
    for start in range(0, len(rows), per_insert):
        chunk = rows[start : start + per_insert]
        execute(
            conn, f"{head} {values_rows(row, len(chunk), '')}{tail}", [value for params in chunk for value in params]
        )


_SAVEPOINT_NUMBERS = itertools.count()


@contextmanager
def attempt(conn: Connection) -> Iterator[None]:
    """A SAVEPOINT around the block, rolled back to when it raises, and otherwise never released:
    the transaction's commit ends it. SQLAlchemy's ``begin_nested`` releases it at the end of the
    block, one more round trip on PostgreSQL while the block's writes hold their rows (a claim's
    inventories and quota counters) until the commit. Each has a name of its own, so that nested
    and successive attempts roll back to their own. A connection lost in the block has no
    savepoint left to roll back to: the loss itself goes on to the caller (and the transaction's
    retry)."""
    name = f"attempt_{next(_SAVEPOINT_NUMBERS)}"
    execute(conn, f"SAVEPOINT {name}")
    try:
        yield
    except BaseException:
        if not conn.invalidated:
            execute(conn, f"ROLLBACK TO SAVEPOINT {name}")
        raise


def db_time(conn: Connection, moment: datetime.datetime) -> datetime.datetime | str:
    """``moment`` (naive UTC) as the driver should receive it."""
    if _is_postgres(conn):
        return moment
    # SQLAlchemy's text form for SQLite (zero-padded year, always six digits of microseconds), which
    # isoformat writes at a fraction of strftime's cost.
    return moment.isoformat(" ", "microseconds")


def py_time(value: datetime.datetime | str | None) -> datetime.datetime | None:
    """A timestamp column's value as a datetime, whichever database returned it."""
    if value is None or isinstance(value, datetime.datetime):
        return value
    return datetime.datetime.fromisoformat(value)
