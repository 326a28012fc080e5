"""What a PostgreSQL write sends with its BEGIN and with its COMMIT, beyond its own statements.

- **Settings with the BEGIN.** ``Database.write(work, settings=…)`` sets transaction-local
  settings (``set_config(…, true)``) in the round trip that opens the transaction; the work asks
  ``local_setting`` whether it was begun with one (or set one since: ``note_local_setting``),
  rather than setting it again.
- **What the transaction established.** A statement of the work may have established something
  for the rest of the transaction (a pick's consumer written only because its project has no quota
  limit, ``berth.store.pick.claim``); ``learn`` keeps it for the work's later steps (``learned``),
  which then need not ask the database again.
- **A last statement with the COMMIT.** The work may leave its last statement to the Database
  (``commit_with``), which sends it and the COMMIT together once the work returns, so that the rows
  that statement locks are held for the server's time alone. A failure of it never reaches the
  COMMIT; a connection lost on the way is resolved by the transaction's commit mark, as a lost
  COMMIT is (``berth.store.database``).

All live in thread-local state: a write runs on its thread from BEGIN to COMMIT, and the Database
clears them when each attempt at a write starts, so that nothing a rolled-back attempt learned
reaches the next.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import sqlalchemy as sa
from sqlalchemy import Connection

from berth.sql.driver import driver_cursor, driver_error
from berth.store.rawsql import Row

if TYPE_CHECKING:
    import psycopg


@dataclass(frozen=True)
class FinalStatement:
    """A write's last statement, sent with its COMMIT (``commit_with``): its SQL, its values written
    in (quoted by psycopg's ``quote``), what to make of its rows, and the refusal a failure of it
    means, if any."""

    sql: str
    on_rows: Callable[[Sequence[Row]], None]
    refusal: Callable[[sa.exc.DBAPIError], Exception | None]


# This thread's write's FinalStatement, if it left one.
_final = threading.local()
# The transaction-local settings this thread's write was begun with (``berth.store.database``).
_settings = threading.local()
# What this thread's write learned of its transaction (``learn``), cleared with its settings.
_learned = threading.local()


def set_locally_sql(settings: Mapping[str, str]) -> str:
    """PostgreSQL: statements that set ``settings`` until the transaction ends, their names and
    values quoted by the driver's ``quote`` (for a script: ``execute_script``). Not composed through
    the connection's adapters, which cost a pick about 40 µs for one setting."""
    from psycopg.sql import quote

    return "; ".join(f"SELECT set_config({quote(name)}, {quote(value)}, true)" for name, value in settings.items())


def note_local_settings(settings: Mapping[str, str]) -> None:
    """The settings this thread's write transaction was begun with (set or cleared per write); what
    the last write learned (``learn``) is forgotten with them."""
    _settings.current = dict(settings)
    _learned.facts = {}


def note_local_setting(name: str, value: str) -> None:
    """A setting the write's work set itself, after the BEGIN."""
    current: dict[str, str] = getattr(_settings, "current", {})
    _settings.current = {**current, name: value}


def learn(name: str, value: str) -> None:
    """Something a statement of this thread's write established for the rest of its transaction
    (a consumer whose project has no quota limits, ``berth.store.pick.claim``), for its later work to
    read (``learned``) instead of asking the database again."""
    facts: dict[str, str] = getattr(_learned, "facts", {})
    _learned.facts = {**facts, name: value}


def learned(name: str) -> str | None:
    facts: dict[str, str] = getattr(_learned, "facts", {})
    return facts.get(name)


def local_setting(name: str) -> str | None:
    """The value ``name`` was set to with the BEGIN of this thread's write, if it was."""
    current: dict[str, str] = getattr(_settings, "current", {})
    return current.get(name)


def commits_with_statement(conn: Connection) -> bool:
    """Whether the write may leave its last statement to be sent with its COMMIT (``commit_with``):
    on PostgreSQL, on a connection in the driver's autocommit whose transaction the write opened
    itself (``berth.store.database``: BEGIN with the mark), so that the driver follows the COMMIT."""
    if conn.dialect.name != "postgresql":
        return False
    from psycopg.pq import TransactionStatus

    dbapi_connection = cast("psycopg.Connection[Any]", conn.connection.dbapi_connection)
    return bool(dbapi_connection.autocommit) and dbapi_connection.info.transaction_status == TransactionStatus.INTRANS


def commit_with(conn: Connection, statement: FinalStatement) -> None:
    """Where ``commits_with_statement``: leave ``statement`` to be the write's last, sent with its
    COMMIT in one round trip with nothing of the caller's between them (``berth.store.database``
    sends them when the write's work returns). When the statement fails the COMMIT is not run, and
    the transaction is rolled back."""
    assert commits_with_statement(conn)
    _final.statement = statement


def forget_final_statement() -> None:
    _final.statement = None


def send_final_statement_and_commit(conn: Connection) -> None:
    """The statement ``commit_with`` left, if any, and the COMMIT (``berth.store.database``), in one
    simple query: PostgreSQL runs the COMMIT only if the statement succeeded. One message each way,
    where psycopg's pipeline mode waited on the socket four times more (each a turn at the interpreter
    given up, on a busy worker). A statement sent so is planned on every run: one whose work is in
    a function is planned once per session, inside it."""
    statement: FinalStatement | None = getattr(_final, "statement", None)
    if statement is None:
        return
    _final.statement = None
    script = statement.sql + "; COMMIT"
    cursor = driver_cursor(conn, script)
    try:
        cursor.execute(script)
        rows = list(cursor.fetchall()) if cursor.description is not None else []
    except conn.dialect.loaded_dbapi.Error as error:
        wrapped = driver_error(conn, error, script, (), cursor)
        refusal = statement.refusal(wrapped) if isinstance(wrapped, sa.exc.DBAPIError) else None
        raise (refusal or wrapped) from error
    finally:
        cursor.close()
    statement.on_rows(rows)
