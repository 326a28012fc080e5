"""Engines and transactions.

Every API request runs in exactly one transaction.  Writers on SQLite take the write lock up front
(``BEGIN IMMEDIATE``) and wait for it with a busy timeout, because a deferred transaction that reads
and then writes can fail at once with "database is locked" when another writer got there first.  On
PostgreSQL writers rely on row locks taken by conditional UPDATEs (provider generations, inventory
usage), so concurrent writers serialise on exactly the rows they share.

Writers on one SQLite file also queue on an exclusive ``flock`` of a lock file beside it before
``BEGIN IMMEDIATE``.  SQLite itself waits for its write lock by sleeping and polling, with sleeps that
grow to tens of milliseconds, while a Berth write transaction holds the lock for well under one: with
several worker processes, most of a writer's time went to sleeping after the lock was already free.
A blocked ``flock`` is woken by the kernel the moment the holder releases it (or dies).

On PostgreSQL reads run without BEGIN and COMMIT, each of which costs a round trip (about as much
CPU, in psycopg and in the server, as a statement): at READ COMMITTED every statement takes its own
snapshot inside a transaction as well, so a read-only transaction adds nothing.

Transient failures (deadlock, serialisation failure, lock timeout, lost connection) are retried by
running the whole unit of work again in a fresh transaction, never by continuing a failed one: a retry
inside the same transaction would see its own earlier writes and count them twice.

A connection lost during COMMIT leaves the outcome unknown: the server (or the standby that took
over) may have the transaction or not.  Running the work again would then write twice, or refuse
what landed (a consumer generation that moved on).  So on PostgreSQL every write transaction, as its
first statement, inserts a row of its own into ``commit_marks`` with a random token; when its COMMIT
fails for a lost connection, a new connection inserts the same token as *fenced*
(``ON CONFLICT DO NOTHING``) and reads which row is there.  The transaction's own row means it
committed: its result is returned as it is.  The fenced row means it did not, and never will (its
insert would conflict now), and the work runs again.  The insert waits while the first transaction
still holds its uncommitted row (a connection cut on the way, the server alive), so it never decides
while the outcome is still open.  (First, not last: the COMMIT then follows the work's last
statement at once, and the rows the work locks, such as a claim's inventories and a project's quota
counters, are held for one round trip fewer.)  With synchronous replication (docs/high-availability.md) a commit
acknowledged by the old primary is on the standby that replaces it; one it had not acknowledged may
be there or not, and the mark says which.  Single-statement writes (``write_statement``) take the
same path on PostgreSQL: in autocommit they could not carry a mark.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import random
import secrets
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast

import sqlalchemy as sa
from sqlalchemy import event, exc

from berth.domain.errors import BerthError, OutcomeUnknown, Unavailable
from berth.store.checkpointer import BACKSTOP_PAGES, Checkpointer
from berth.store.rawsql import execute_script
from berth.store.write_edges import (
    forget_final_statement,
    note_local_settings,
    send_final_statement_and_commit,
    set_locally_sql,
)

if TYPE_CHECKING:
    import psycopg

LOG = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_SQLITE_FILE = "berth.sqlite"
SQLITE_BUSY_TIMEOUT_S = 30
MAX_ATTEMPTS = 8

# How long a lost COMMIT's outcome is sought (a failover takes seconds), and how long marks are kept.
RESOLVE_TIMEOUT_S = 60.0
MARK_KEEP = "1 hour"
PRUNE_INTERVAL_S = 60.0

_MARK_SQL = "INSERT INTO commit_marks (token, fenced, created_at) VALUES (%(token)s, false, now() AT TIME ZONE 'UTC')"
# The same, with the BEGIN that opens the transaction, in one round trip: sent without parameters
# (the token is hex, written into the text), psycopg sends both statements in one simple query.
_BEGIN_AND_MARK_SQL = (
    "BEGIN; INSERT INTO commit_marks (token, fenced, created_at) VALUES ('{token}', false, now() AT TIME ZONE 'UTC')"
)
_FENCE_SQL = (
    "INSERT INTO commit_marks (token, fenced, created_at) VALUES (%(token)s, true, now() AT TIME ZONE 'UTC') "
    "ON CONFLICT (token) DO NOTHING"
)
_FENCED_SQL = "SELECT fenced FROM commit_marks WHERE token = %(token)s"
_PRUNE_SQL = f"DELETE FROM commit_marks WHERE created_at < now() AT TIME ZONE 'UTC' - interval '{MARK_KEEP}'"

# A write refused by a foreign key runs again this many times at most, so that one that a bug
# makes fail every time is answered at once (a 500), not after the transient errors' back-off.
MAX_REFERENCE_ATTEMPTS = 3
_FOREIGN_KEY_VIOLATION = "23503"
# PostgreSQL SQLSTATEs after which the whole transaction may safely run again.
_RETRYABLE_PG_STATES = {"40001", "40P01", "55P03", "57P01", "57P02", "57P03", "08000", "08003", "08006"}


def default_url() -> str:
    return os.environ.get("BERTH_DATABASE_URL") or f"sqlite:///{DEFAULT_SQLITE_FILE}"


def normalise_url(url: str) -> str:
    """Accept the plain ``postgresql://`` form and route it to psycopg 3."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


# What an operator can give as --database, for the messages that refuse anything else.
URL_FORMS = "sqlite:///FILE or postgresql://user:password@host/dbname"


class DatabaseUnusable(Exception):
    """A database URL Berth cannot use, a database it cannot reach or open, or one whose schema this
    release cannot use: one line saying what to do."""


def _check_url(url: str) -> None:
    """Refuse, before any engine is built, a URL that names no database Berth keeps its books in."""
    shown = url.split("@", 1)[-1] if "@" in url else url
    try:
        parsed = sa.engine.make_url(url)
    except exc.ArgumentError:
        raise DatabaseUnusable(f"cannot read the database URL {shown!r}: give {URL_FORMS}") from None
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise DatabaseUnusable(f"Berth keeps its books in SQLite or PostgreSQL, not {backend!r}: give {URL_FORMS}")


def refuse_in_memory(url: str) -> None:
    """Refuse a SQLite database in memory (``sqlite://``, ``sqlite:///:memory:``) to a command that
    writes books and exits: they would go with its connection, and it would say they were written."""
    try:
        parsed = sa.engine.make_url(normalise_url(url))
    except exc.ArgumentError:
        return  # Database() says what is wrong with it
    if parsed.get_backend_name() != "sqlite":
        return
    database = parsed.database
    if not database or database == ":memory:" or parsed.query.get("mode") == "memory":
        raise DatabaseUnusable(
            f"{url!r} is a SQLite database in memory, gone when this command ends: give sqlite:///FILE "
            "(a file that does not exist yet makes a new one) or postgresql://user:password@host/dbname"
        )


def check_url(url: str) -> None:
    """:class:`DatabaseUnusable` for a URL, as an operator gives it, that names no database Berth
    keeps its books in; before any engine is built (for the conductors' database too)."""
    _check_url(normalise_url(url))


def failed_to_open(error: exc.DBAPIError) -> bool:
    """Whether ``error`` says the database could not be reached or opened (or, on SQLite, locked for
    longer than the busy timeout), which :func:`describe_failure` tells the operator in one line."""
    # Not only an OperationalError: SQLite says so of a file that is not a database when the
    # connection's first statement (its pragmas) reads the header.
    return isinstance(error, exc.OperationalError) or _not_a_database(error)


def _missing_folder(database: str | None) -> str | None:
    """The folder a SQLite file would be in, when that folder does not exist."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    folder = os.path.dirname(os.path.abspath(database))
    return None if os.path.isdir(folder) else folder


def describe_failure(error: exc.DBAPIError, url: str) -> str:
    """One line for a database that cannot be reached or opened: which, why, and what to check."""
    parsed = sa.engine.make_url(url)
    where = parsed.render_as_string(hide_password=True)
    lines = [line.strip() for line in str(error.orig).splitlines() if line.strip()]
    reason = lines[0] if lines else type(error.orig).__name__
    if parsed.get_backend_name() == "sqlite":
        if _not_a_database(error):
            return (
                f"{parsed.database} is not a SQLite database ({reason}): give the file of Berth's database, "
                "or the path of a file that does not exist yet to make a new one"
            )
        if getattr(error.orig, "sqlite_errorcode", None) == sqlite3.SQLITE_BUSY:
            return (
                f"the SQLite file {parsed.database} is locked: another process held its write lock for "
                "longer than Berth waits for it (a long write, or a transaction left open): let it finish "
                "or stop it, then start again"
            )
        if getattr(error.orig, "sqlite_errorcode", None) == sqlite3.SQLITE_READONLY:
            return (
                f"the SQLite file {parsed.database} is read-only ({reason}): Berth writes to it; let the "
                "file and its folder be written, or give another database URL"
            )
        folder = _missing_folder(parsed.database)
        if folder:
            return (
                f"no folder {folder} for the SQLite file {parsed.database}: create the folder, or give "
                "another database URL"
            )
        return f"cannot open the database {where}: {reason}; check the file and its folder's permissions"
    return f"cannot reach the database {where}: {reason}; is PostgreSQL running there, and is the URL right?"


def _not_a_database(error: exc.DBAPIError) -> bool:
    """SQLite found a file that is no database of its own (text, another program's file, encrypted)."""
    return isinstance(error.orig, sqlite3.DatabaseError) and (
        getattr(error.orig, "sqlite_errorcode", None) == sqlite3.SQLITE_NOTADB
    )


class Database:
    def __init__(self, url: str | None = None, *, pool_size: int = 5):
        self.given_url = url or default_url()
        self.url = normalise_url(self.given_url)
        _check_url(self.url)
        self.is_sqlite = self.url.startswith("sqlite")
        if self.is_sqlite:
            self.engine = sa.create_engine(
                self.url,
                connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False},
            )
            _configure_sqlite(self.engine)
            self._writer_lock = _writer_lock_for(self.engine.url.database)
            self._checkpointer = _checkpointer_for(self.engine.url.database)
        else:
            self.engine = sa.create_engine(
                # No pre-ping: a dead connection fails its first statement, is invalidated and the
                # transaction is retried on a fresh one (see _run), without a round trip per request.
                self.url,
                pool_size=pool_size,
                max_overflow=pool_size * 2,
            )
            _configure_postgresql(self.engine)
            self._writer_lock = None
            self._checkpointer = None
        self._held = threading.local()
        self._held_lock = threading.Lock()
        self._every_held: weakref.WeakSet[_HeldConnection] = weakref.WeakSet()
        # Threads beyond this many take a connection per unit of work, as before: kept ones must not
        # leave a server with many threads waiting for the pool while they sit idle.
        self._most_held = pool_size
        # Called before each retry of a unit of work (the API counts them as a metric).
        self.retry_listeners: list[Callable[[], None]] = []
        self._pruned_at = time.monotonic()

    def connect(self) -> sa.Connection:
        """A connection of its own, for work outside the units of work (schema upgrades, snapshots);
        :class:`DatabaseUnusable`, saying which database and why, when none can be opened."""
        try:
            return self.engine.connect()
        except exc.DBAPIError as error:
            if failed_to_open(error):
                raise DatabaseUnusable(describe_failure(error, self.given_url)) from error
            raise

    def dispose(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
        self._release_held_connections()
        self.engine.dispose()

    def _release_held_connections(self) -> None:
        """Give every thread's kept connection back to the pool (shutdown and tests: no unit of
        work may be running)."""
        with self._held_lock:
            every_held = list(self._every_held)
        for held in every_held:
            held.release()

    def _connection(self) -> tuple[sa.Connection, _HeldConnection | None]:
        """This thread's kept connection, checked out of the pool once and kept between units of
        work; or a connection for this unit alone, when it is nested in another or too many threads
        keep one already."""
        held = getattr(self._held, "connection", None)
        if held is None:
            with self._held_lock:
                if len(self._every_held) < self._most_held:
                    held = self._held.connection = _HeldConnection(postgres=not self.is_sqlite)
                    self._every_held.add(held)
            if held is None:
                return self.engine.connect(), None
        if held.busy:
            return self.engine.connect(), None
        conn = held.conn
        if conn is None or conn.closed or conn.invalidated:
            held.release()
            conn = held.conn = self.engine.connect()
        held.busy = True
        return conn, held

    @contextmanager
    def _transaction(
        self, write: bool, single_statement: bool, mark: str | None = None, settings: Mapping[str, str] | None = None
    ) -> Iterator[sa.Connection]:
        """A connection in the unit's transaction (none for a read on PostgreSQL); on PostgreSQL a
        write's first statement inserts its ``mark``, and its ``settings`` are set for the
        transaction with it (``write_edges.local_setting`` then answers them)."""
        conn, held = self._connection()
        try:
            if self.is_sqlite and conn.get_execution_options().get("berth_write", False) != write:
                conn.execution_options(berth_write=write)  # in place: read by _on_begin
            if write and self._writer_lock is not None:
                # The lock covers the transaction only: every other writer of the file waits
                # while it is held.
                with self._writer_lock, conn.begin():
                    yield conn
            elif self.is_sqlite:
                with conn.begin():
                    yield conn
            elif write:
                assert mark is not None  # every PostgreSQL write carries one (_run)
                with conn.begin():
                    if held is not None:
                        # Kept in autocommit, the connection's transaction is begun by the mark's own
                        # statement, where psycopg would send a BEGIN of its own first and wait for it.
                        # psycopg's commit and rollback follow the server's transaction status.
                        _set_autocommit(conn, True)
                        begin = _BEGIN_AND_MARK_SQL.format(token=mark)
                        execute_script(conn, begin + ("; " + set_locally_sql(settings) if settings else ""))
                    else:
                        conn.exec_driver_sql(_MARK_SQL, {"token": mark})
                        if settings:
                            execute_script(conn, set_locally_sql(settings))
                    note_local_settings(settings or {})
                    yield conn
            elif held is not None:
                # Kept in autocommit between units: most requests need it, and switching costs
                # Python on every request; writes begin their transaction themselves (above), and
                # it is switched off on release, for the pool.
                _set_autocommit(conn, True)
                yield conn
            else:
                with _autocommit(conn):
                    yield conn
        except BerthError:
            raise  # a refusal: the transaction was rolled back and the connection is sound
        except BaseException:
            # What failed may have left the connection in any state: it goes back to the pool,
            # which rolls it back (or drops it if it was lost), and the next unit takes another.
            if held is not None:
                held.release()
            raise
        finally:
            if held is None:
                conn.close()
            elif held.conn is not None and conn.in_transaction():
                # Core statements in autocommit still open SQLAlchemy's own (empty) transaction,
                # which would refuse the next unit's begin().
                try:
                    conn.rollback()
                    held.busy = False
                except Exception:  # noqa: BLE001 - lost on the way: the next unit takes another
                    held.release()
            else:
                held.busy = False

    def read(self, work: Callable[[sa.Connection], T]) -> T:
        return self._run(work, write=False)

    def write(self, work: Callable[[sa.Connection], T], *, settings: Mapping[str, str] | None = None) -> T:
        """``work`` in a write transaction; on PostgreSQL with ``settings`` set for the transaction
        from its first round trip (``set_config(…, true)``; SQLite has none and ignores them)."""
        return self._run(work, write=True, settings=settings)

    def write_statement(self, work: Callable[[sa.Connection], T]) -> T:
        """``write`` for work that changes the database with a single statement.  It may read
        before that statement, as long as the statement itself re-checks what those reads decided
        (generations, uniqueness), and after it only to explain a refusal.  On PostgreSQL it runs in
        a transaction like any write, whose mark resolves a lost COMMIT."""
        return self._run(work, write=True, single_statement=True)

    def _run(
        self,
        work: Callable[[sa.Connection], T],
        *,
        write: bool,
        single_statement: bool = False,
        settings: Mapping[str, str] | None = None,
    ) -> T:
        marked = write and not self.is_sqlite
        if write and self._checkpointer is not None:
            self._checkpointer.ensure_running()
        for attempt in range(1, MAX_ATTEMPTS + 1):
            token = secrets.token_hex(16) if marked else None
            committing = False
            forget_final_statement()
            note_local_settings({})
            try:
                with self._transaction(write, single_statement, token, settings) as conn:
                    result = work(conn)
                    # From here on the COMMIT may have been sent, with the statement the work left to
                    # go with it, if any (whose refusal is raised as such, the transaction rolled back).
                    committing = True
                    send_final_statement_and_commit(conn)
                if marked:
                    self._prune_marks_now_and_then()
                return result
            except exc.DBAPIError as error:
                if committing and token is not None and _is_transient(error):
                    if self._committed(token, error):
                        LOG.info("the connection was lost during COMMIT, which took effect: %s", error.orig)
                        return result
                    LOG.info("the connection was lost during COMMIT, which did not take effect: %s", error.orig)
                if _lost_a_race_on_a_reference(error) and attempt < MAX_REFERENCE_ATTEMPTS:
                    # Run again, it reads what the other transaction committed and answers as if it
                    # had come after it: the row it needs is gone, or the row it deletes is in use.
                    LOG.info("retrying transaction after a foreign key violation (attempt %d): %s", attempt, error.orig)
                    continue
                if not _is_transient(error) or attempt == MAX_ATTEMPTS:
                    if _is_transient(error):
                        LOG.warning("giving up after %d attempts: %s", attempt, error)
                        raise Unavailable("The database is busy or unreachable; try the request again.") from error
                    raise
                LOG.info("retrying transaction after transient error (attempt %d): %s", attempt, error.orig)
                for listener in self.retry_listeners:
                    listener()
                time.sleep(random.uniform(0, 0.01 * 2**attempt))
        raise AssertionError("unreachable")

    def _committed(self, token: str, lost: exc.DBAPIError) -> bool:
        """Whether the transaction that inserted the mark ``token`` committed; asked on new
        connections until the database answers (a failover takes seconds)."""
        deadline = time.monotonic() + RESOLVE_TIMEOUT_S
        attempt = 0
        while True:
            attempt += 1
            try:
                with self.engine.connect() as conn, _autocommit(conn):
                    conn.exec_driver_sql(_FENCE_SQL, {"token": token})
                    fenced = conn.exec_driver_sql(_FENCED_SQL, {"token": token}).scalar_one()
                return not fenced
            except exc.DBAPIError as error:
                if not _is_transient(error) or time.monotonic() > deadline:
                    LOG.error("could not resolve the outcome of a COMMIT lost with %s: %s", lost.orig, error)
                    raise OutcomeUnknown(
                        "The connection to the database was lost while this write was committed, and the "
                        "database could not be asked whether it took effect; read the result back before "
                        "trying again."
                    ) from error
                LOG.info("resolving a lost COMMIT (attempt %d): %s", attempt, error.orig)
                time.sleep(random.uniform(0, min(1.0, 0.01 * 2**attempt)))

    def _prune_marks_now_and_then(self) -> None:
        """Delete the marks older than ``MARK_KEEP``, at most once a ``PRUNE_INTERVAL_S`` per process;
        a failure only leaves them for the next time."""
        now = time.monotonic()
        if now - self._pruned_at < PRUNE_INTERVAL_S:
            return
        self._pruned_at = now
        try:
            with self.engine.connect() as conn, _autocommit(conn):
                conn.exec_driver_sql(_PRUNE_SQL)
        except exc.DBAPIError as error:
            LOG.info("pruning commit marks failed: %s", error.orig)


def _psycopg_connection(conn: sa.Connection) -> psycopg.Connection[Any]:
    """The driver's connection of a PostgreSQL ``conn`` (the DB-API names no autocommit)."""
    return cast("psycopg.Connection[Any]", conn.connection.dbapi_connection)


def _set_autocommit(conn: sa.Connection, on: bool) -> None:
    dbapi_connection = _psycopg_connection(conn)
    if dbapi_connection.autocommit != on:
        dbapi_connection.autocommit = on


@contextmanager
def _autocommit(conn: sa.Connection) -> Iterator[None]:
    """The psycopg connection in autocommit for the duration: no BEGIN, and SQLAlchemy's own
    commit and the pool's reset find no transaction open and send nothing."""
    dbapi_connection = _psycopg_connection(conn)
    dbapi_connection.autocommit = True
    try:
        yield
    finally:
        try:
            dbapi_connection.autocommit = False
        except Exception:  # noqa: BLE001 - closed or broken: never pool it in autocommit
            if not conn.invalidated:
                conn.invalidate()


class _HeldConnection:
    """The connection a thread keeps checked out of the pool between its units of work.

    Taking a connection from SQLAlchemy's pool and giving it back (with its reset) cost about
    60 µs of Python per request, a tenth of a provider write in process; a worker's threads live
    as long as the worker and serve one request at a time, so each keeps one.  It goes back to the
    pool after a failure, when its thread ends, and on ``Database.dispose``.
    """

    __slots__ = ("conn", "busy", "postgres", "__weakref__")

    def __init__(self, postgres: bool):
        self.conn: sa.Connection | None = None
        self.busy = False
        self.postgres = postgres

    def release(self) -> None:
        conn, self.conn = self.conn, None
        self.busy = False
        if conn is None or conn.closed:
            return
        try:
            if self.postgres and not conn.invalidated:
                _set_autocommit(conn, False)  # the pool hands out connections with transactions
        except Exception:  # noqa: BLE001 - closed or broken: never pool it in autocommit
            conn.invalidate()
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - a lost connection: the pool drops it
            LOG.debug("closing a kept connection failed", exc_info=True)

    def __del__(self) -> None:
        # The thread-local storage holding this object is cleared when its thread ends.
        # At interpreter exit this may fail: the process takes the connection with it.
        with contextlib.suppress(Exception):
            self.release()


class _WriterLock:
    """Exclusive among the threads of this process (a mutex) and among processes (``flock``)."""

    def __init__(self, path: str):
        self.path = path
        self._mutex = threading.Lock()
        self._fd: int | None = None
        self._pid: int | None = None

    def _descriptor(self) -> int:
        # One descriptor per process: flock belongs to the open file, which a forked child shares
        # with its parent, so a descriptor inherited across fork would not exclude the parent.
        if self._fd is None or self._pid != os.getpid():
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            self._pid = os.getpid()
        return self._fd

    def __enter__(self) -> _WriterLock:
        self._mutex.acquire()
        try:
            fcntl.flock(self._descriptor(), fcntl.LOCK_EX)
        except BaseException:
            self._mutex.release()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        assert self._fd is not None  # opened by __enter__
        try:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._mutex.release()


def _checkpointer_for(database: str | None) -> Checkpointer | None:
    """The checkpoint thread of a SQLite file (none for a database in memory, which has no log, nor
    for a URI, left to SQLite's own checkpoints as it is to no writer lock)."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Checkpointer(database, SQLITE_BUSY_TIMEOUT_S)


def _writer_lock_for(database: str | None) -> _WriterLock | None:
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    if _missing_folder(database):
        return None  # opening the database fails as well, and says why
    path = os.path.abspath(database) + ".writer-lock"
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
    except OSError as error:
        LOG.warning("no writer lock file %s (%s): writers wait on SQLite's own lock", path, error)
        return None
    return _WriterLock(path)


def _lost_a_race_on_a_reference(error: exc.DBAPIError) -> bool:
    """A foreign key violation on PostgreSQL: a write checks the rows it refers to (a class, a trait,
    a parent) and those referring to a row it deletes before it writes, and another transaction
    committed between the check and the write (SQLite has one writer at a time: its checks hold)."""
    return getattr(error.orig, "sqlstate", None) == _FOREIGN_KEY_VIOLATION


def _is_transient(error: exc.DBAPIError) -> bool:
    if error.connection_invalidated:
        return True
    state = getattr(error.orig, "sqlstate", None)
    if state in _RETRYABLE_PG_STATES:
        return True
    if isinstance(error, exc.OperationalError) and type(error.orig).__module__.startswith("psycopg"):
        # psycopg raises OperationalError for a server it cannot reach or that is going away
        # (refused, shutting down, closed); mistakes in SQL are other classes.  A failed connect
        # carries no SQLSTATE and is not marked invalidated, so it is recognised here.
        return True
    message = str(error.orig).lower()
    return "database is locked" in message or "database is busy" in message


def _configure_postgresql(engine: sa.Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: object) -> None:
        # No JIT compilation. Its threshold is a plan's estimated cost, and on a freshly loaded
        # database (statistics that count a class's inventories a hundred times too few) statements
        # that run in 0.2 ms were compiled first, for 4-7 ms each: a sharing-pool query at 100,000
        # hosts took 12 ms. A statement of Berth's reads a few index ranges; none gains from it.
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SET jit = off")
        dbapi_connection.commit()


def _configure_sqlite(engine: sa.Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: object) -> None:
        # Let SQLAlchemy's "begin" event below issue BEGIN itself, so writers can ask for IMMEDIATE.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        # A commit checkpoints only a log its process's thread let grow this long (checkpointer).
        cursor.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_S * 1000}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        # Straight to the driver (one BEGIN per request; SQLAlchemy's execution path costs more
        # than the statement), with a failure raised as SQLAlchemy would, so that it is retried.
        statement = "BEGIN IMMEDIATE" if conn.get_execution_options().get("berth_write") else "BEGIN"
        try:
            cast(sqlite3.Connection, conn.connection.dbapi_connection).execute(statement)
        except sqlite3.Error as error:
            raise exc.DBAPIError.instance(statement, (), error, sqlite3.Error, dialect=conn.dialect) from error
