"""The journal: one row per server operation, written before and after every step.

A conductor writes an operation's row when it starts, moves ``step`` forward only once the step's
effect is done, and ``state`` to ``done``, ``failed`` or ``rolled_back`` at the end. Each row names its
``owner`` (one conductor) and the owner's last ``heartbeat``: a running operation whose owner has not
beaten for ``dead_after`` seconds was left by a conductor that died, and another conductor takes it
over (``take_over``, one UPDATE that only one taker can win) to finish or undo it.

Every time written (heartbeats, creation and change times) and every time compared is the database's
own clock, read inside the statement that uses it: conductors on machines whose clocks disagree
would otherwise see a live conductor's heartbeat as old (a taker whose clock runs ahead takes over
work still being done) or a dead one's as fresh.  On PostgreSQL that is ``statement_timestamp()`` (one
moment for the whole statement); a SQLite journal is shared by the conductors of one machine, whose
clock SQLite reads.

A write whose connection was lost (a PostgreSQL failover) is not left to the caller: it runs again
on a new connection until ``RETRY_SECONDS`` have passed.  Writes that set the row to what the
conductor holds (``save``, ``beat``, ``abandon``) may simply run again.  ``start`` and ``take_over``
first read whether the lost write landed, since their COMMIT may have: the new row is there, or the
row names the new owner (owners are unique), and the operation is returned as written; run again
blindly, a landed ``take_over`` would find the owner changed and report the operation not taken,
while the conductor's heartbeat kept it alive with nobody working on it.  Reads (``get``,
``for_instance``, ``running``) run again the same way: a conductor starting, or resuming the dead
ones' work, during a failover waits for the new primary instead of failing.

Any SQLAlchemy URL works (a SQLite file by default); opening a journal brings its database to the
newest schema (``berth.conductor.migrate``: Alembic, the journal's table and its companions'). A
SQLite journal is shared by the conductors of one machine: it runs in WAL mode (readers never block the
writer, and a commit appends to the log instead of rewriting pages) and waits for the write lock
rather than failing at once. Writers of one process take turns on a lock of the process first:
SQLite lets one writer in at a time anyway, and a writer kept out by SQLite's own lock polls for
it with growing naps, which sixteen conductors of one process turned into most of each
operation's time.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TypeVar

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from berth.conductor import migrate
from berth.conductor.records import tables as records_tables
from berth.sql.driver import DriverStatement

LOG = logging.getLogger(__name__)

# How long a SQLite journal's writer waits for the lock another conductor holds, in seconds.
SQLITE_LOCK_WAIT: Final = 60
# Connections a SQLite journal keeps open: enough for every conductor thread of a process, so
# that none is opened (and set up) again for each write.
SQLITE_CONNECTIONS: Final = 32
# How long a write lost with its connection is tried again (a PostgreSQL failover takes seconds).
RETRY_SECONDS: Final = 60.0

T = TypeVar("T")


class TakenOver(BaseException):
    """The operation's row names another owner: a conductor took it over while this one, alive,
    had not beaten for ``dead_after`` (its database failing over, say). Raised by the writes of the
    conductor that lost it, so that it does nothing more on it: a BaseException, which the
    operation's failure path does not handle (its undo would run beside the new owner's work), as
    if its process had died there."""

    def __init__(self, operation: Operation):
        super().__init__(f"operation {operation.id} was taken over from {operation.owner or 'nobody'}")
        self.operation_id = operation.id


RUNNING: Final = "running"
DONE: Final = "done"
FAILED: Final = "failed"
ROLLED_BACK: Final = "rolled_back"
STATES: Final = (RUNNING, DONE, FAILED, ROLLED_BACK)

metadata = sa.MetaData()

operations = sa.Table(
    "conductor_operations",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("instance_uuid", sa.String(36), nullable=False, index=True),
    sa.Column("request", sa.JSON, nullable=False),
    # The last step whose effect is done ("" before the first).
    sa.Column("step", sa.String(64), nullable=False, default=""),
    sa.Column("state", sa.String(16), nullable=False, index=True),
    # What the steps chose and hold: destinations, the host tried, claim ids, the migration.
    sa.Column("selections", sa.JSON, nullable=False),
    sa.Column("attempts", sa.JSON, nullable=False),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("owner", sa.String(64), nullable=False),
    sa.Column("heartbeat", sa.Float, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)


@dataclass
class Operation:
    """One row of the journal, as the steps read and change it."""

    id: str
    kind: str
    instance_uuid: str
    request: dict[str, Any]
    step: str = ""
    state: str = RUNNING
    selections: dict[str, Any] = field(default_factory=dict)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    owner: str = ""
    heartbeat: float = 0.0
    created_at: float = 0.0
    updated_at: float = 0.0

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> Operation:
        return cls(
            id=row["id"],
            kind=row["kind"],
            instance_uuid=row["instance_uuid"],
            request=dict(row["request"]),
            step=row["step"],
            state=row["state"],
            selections=dict(row["selections"]),
            attempts=list(row["attempts"]),
            error=row["error"],
            owner=row["owner"],
            heartbeat=row["heartbeat"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
        )


class Companion(Protocol):
    """Rows kept beside the journal and written in its transactions (the servers' state, by the
    conductors' API): what an operation's start and end change there commits with the journal's row
    or not at all, so that no crash leaves the two disagreeing."""

    def starting(self, conn: Connection, operation: Operation) -> None:
        """In the transaction that writes the operation's first row; raising refuses the start."""

    def ending(self, conn: Connection, operation: Operation, now: float) -> None:
        """In the transaction that writes the operation's end (done, failed or rolled back), at
        ``now`` (the database's time the end is written with); run again, with the same operation,
        when a lost connection made the write run again."""


def database_clock(dialect: str) -> sa.ColumnElement[float]:
    """The database's time now, in seconds since the epoch, as a SQL expression."""
    if dialect == "postgresql":
        return sa.cast(sa.func.extract("epoch", sa.func.statement_timestamp()), sa.Float)
    return sa.cast((sa.func.julianday("now") - 2440587.5) * 86400.0, sa.Float)


class Journal:
    def __init__(self, url_or_engine: str | Engine):
        if isinstance(url_or_engine, Engine):
            self.engine = url_or_engine
        else:
            self.engine = _engine(url_or_engine)
        self._now = database_clock(self.engine.dialect.name)
        self._statements = _Statements(self._now)
        # The two writes of every step, sent straight to the driver (``berth.sql.driver``): through
        # SQLAlchemy's execution they cost a conductor more Python than the rest of the write.
        self._insert = DriverStatement(self._statements.insert, self.engine.dialect)
        self._save = DriverStatement(self._statements.save, self.engine.dialect)
        # SQLite: one writer at a time, waiting here rather than polling SQLite's lock.
        self._write_lock: contextlib.AbstractContextManager[object] = (
            threading.Lock() if self.engine.dialect.name == "sqlite" else contextlib.nullcontext()
        )
        self.upgrade_schema()
        self.companions: list[Companion] = []

    @contextlib.contextmanager
    def _writing(self) -> Iterator[Connection]:
        with self._write_lock, self.engine.begin() as conn:
            yield conn

    def _write(
        self,
        statement: Callable[[Connection], T],
        landed: Callable[[], T | None] | None = None,
        waiting: str | None = None,
    ) -> T:
        """``statement`` in a transaction; after a lost connection, ``landed()`` (when given) says
        whether it took effect (its answer, or None), and the statement runs again if not.
        ``waiting``, when given, is logged once as the first attempt fails: what waits, and why."""
        deadline = time.monotonic() + RETRY_SECONDS
        attempt = 0
        while True:
            attempt += 1
            try:
                if attempt > 1 and landed is not None:
                    found = landed()
                    if found is not None:
                        return found
                with self._writing() as conn:
                    return statement(conn)
            except sa.exc.DBAPIError as error:
                if not connection_lost(error) or time.monotonic() > deadline:
                    raise
                if waiting is not None and attempt == 1:
                    reason = " ".join(str(error.orig).split())  # one line: psycopg's run over several
                    LOG.warning("%s: %s; trying again for up to %.0f s", waiting, reason, RETRY_SECONDS)
            time.sleep(random.uniform(0, min(1.0, 0.02 * 2**attempt)))

    def _read(self, query: Callable[[Connection], T]) -> T:
        return read_through_failover(self.engine, query)

    def upgrade_schema(self) -> None:
        """The conductors' tables, the journal's and its companions', brought to the newest schema
        (``berth.conductor.migrate``); run again after a lost connection, as reads are, so that a
        conductor starting during a failover waits for the new primary rather than exiting."""
        self._write(
            lambda conn: migrate.upgrade(conn, [metadata, records_tables.metadata]),
            waiting="the conductors' database does not answer (restarting or failing over?)",
        )

    def read(self, query: Callable[[Connection], T]) -> T:
        """Any read of the journal's database (its companions' tables too), run again after a lost
        connection as the journal's own reads are."""
        return self._read(query)

    def close(self) -> None:
        self.engine.dispose()

    def start(self, kind: str, instance_uuid: str, request: dict[str, Any], owner: str) -> Operation:
        operation = Operation(str(uuid.uuid4()), kind, instance_uuid, request, owner=owner)

        def insert(conn: Connection) -> Operation:
            [(now,)] = self._insert.rows(
                conn,
                {"id": operation.id, "kind": kind, "instance_uuid": instance_uuid, "request": request, "owner": owner},
            )
            operation.heartbeat = operation.created_at = operation.updated_at = now
            for companion in self.companions:
                companion.starting(conn, operation)
            return operation

        return self._write(insert, lambda: self.get(operation.id))

    def save(self, operation: Operation) -> None:
        """Write the operation as it now is (its step, state, selections and attempts), as long as
        its row still names its owner; else ``TakenOver`` is raised and nothing is written."""

        def update(conn: Connection) -> float | None:
            saved = self._save.rows(
                conn,
                {
                    "operation_id": operation.id,
                    "step": operation.step,
                    "state": operation.state,
                    "selections": operation.selections,
                    "attempts": operation.attempts,
                    "error": operation.error,
                    "owned_by": operation.owner,
                },
            )
            if not saved:
                raise TakenOver(operation)
            now: float = saved[0][0]
            if operation.state != RUNNING:
                for companion in self.companions:
                    companion.ending(conn, operation, now)
            return now

        now = self._write(update)
        if now is not None:
            operation.updated_at = operation.heartbeat = now

    def get(self, operation_id: str) -> Operation | None:
        query = self._statements.by_id
        row = self._read(lambda conn: conn.execute(query, {"operation_id": operation_id}).mappings().first())
        return None if row is None else Operation.from_row(row)

    def for_instance(self, instance_uuid: str) -> list[Operation]:
        query = operations.select().where(operations.c.instance_uuid == instance_uuid).order_by(operations.c.created_at)
        return self._read(lambda conn: [Operation.from_row(r) for r in conn.execute(query).mappings()])

    def find(
        self,
        *,
        instance_uuid: str | None = None,
        state: str | None = None,
        kind: str | None = None,
        project_id: str | None = None,
        limit: int | None = None,
        after: Operation | None = None,
    ) -> list[Operation]:
        """Operations, newest first, of one instance, state or kind, or of the servers of one
        project, deleted ones' too (or any); ``after``: only those that come after this one in that
        order (the page after it)."""
        query = operations.select().order_by(operations.c.created_at.desc(), operations.c.id)
        if project_id is not None:
            servers = records_tables.servers
            query = query.where(
                operations.c.instance_uuid.in_(sa.select(servers.c.id).where(servers.c.project_id == project_id))
            )
        if after is not None:
            query = query.where(
                sa.or_(
                    operations.c.created_at < after.created_at,
                    sa.and_(operations.c.created_at == after.created_at, operations.c.id > after.id),
                )
            )
        for column, value in (
            (operations.c.instance_uuid, instance_uuid),
            (operations.c.state, state),
            (operations.c.kind, kind),
        ):
            if value is not None:
                query = query.where(column == value)
        if limit is not None:
            query = query.limit(limit)
        return self._read(lambda conn: [Operation.from_row(r) for r in conn.execute(query).mappings()])

    def ended(self, states: tuple[str, ...], limit: int) -> list[Operation]:
        """The last ``limit`` operations that ended in one of ``states``, the latest end first (an
        operation's ``updated_at`` is its end once it is no longer running)."""
        query = (
            operations.select()
            .where(operations.c.state.in_(states))
            .order_by(operations.c.updated_at.desc(), operations.c.id)
            .limit(limit)
        )
        return self._read(lambda conn: [Operation.from_row(r) for r in conn.execute(query).mappings()])

    def running(self) -> list[Operation]:
        query = operations.select().where(operations.c.state == RUNNING).order_by(operations.c.created_at)
        return self._read(lambda conn: [Operation.from_row(r) for r in conn.execute(query).mappings()])

    def silent(self, owner: str, dead_after: float) -> list[Operation]:
        """The running operations of other owners than ``owner`` whose owner has not beaten for
        ``dead_after`` seconds by the database's clock (abandoned ones too), oldest first: those
        ``take_over`` may win. One read, where trying ``take_over`` on every running operation would
        be a write transaction each, every round of housekeeping, while their owners are alive."""
        query = self._statements.silent
        parameters = {"owner": owner, "dead_after": dead_after}
        return self._read(lambda conn: [Operation.from_row(r) for r in conn.execute(query, parameters).mappings()])

    def beat(self, owner: str) -> int:
        """The owner is alive: every running operation it owns says so now."""

        def update(conn: Connection) -> int:
            result = conn.execute(self._statements.beat, {"beating": owner})
            return int(result.rowcount)

        return self._write(update)

    def take_over(self, operation: Operation, owner: str, dead_after: float) -> Operation | None:
        """The operation, now ``owner``'s, if its owner was silent for ``dead_after`` seconds and no
        other conductor took it first; else None."""

        def update(conn: Connection) -> bool:
            result = conn.execute(
                self._statements.take_over,
                {
                    "operation_id": operation.id,
                    "owner_was": operation.owner,
                    "heartbeat_was": operation.heartbeat,
                    "dead_after": dead_after,
                    "taker": owner,
                },
            )
            return bool(result.rowcount == 1)

        def ours() -> bool | None:
            current = self.get(operation.id)
            return True if current is not None and current.owner == owner else None

        if not self._write(update, ours):
            return None
        return self.get(operation.id)

    def abandon(self, operation: Operation, error: str) -> None:
        """Nobody's: the next resume() of any conductor takes it over (a resume that failed). Only
        by its owner: one that lost it meanwhile gets ``TakenOver``."""

        def update(conn: Connection) -> None:
            result = conn.execute(
                operations.update()
                .where(operations.c.id == operation.id, operations.c.owner == operation.owner)
                .values(owner="", heartbeat=0.0, error=error, updated_at=self._now)
            )
            if result.rowcount != 1:
                raise TakenOver(operation)

        self._write(update)
        operation.owner, operation.error, operation.heartbeat = "", error, 0.0


class _Statements:
    """The journal's frequent statements, built once: SQLAlchemy then finds each one's compiled form
    by a key it keeps, instead of building the statement and working out that key on every write
    (most of a step's write, measured)."""

    def __init__(self, now: sa.ColumnElement[float]):
        self.insert = (
            operations.insert()
            .values(
                id=sa.bindparam("id"),
                kind=sa.bindparam("kind"),
                instance_uuid=sa.bindparam("instance_uuid"),
                request=sa.bindparam("request"),
                step="",
                state=RUNNING,
                selections={},
                attempts=[],
                error=None,
                owner=sa.bindparam("owner"),
                heartbeat=now,
                created_at=now,
                updated_at=now,
            )
            .returning(operations.c.heartbeat)
        )
        # Only by the owner the row names (a take-over changes it; ``TakenOver``).
        self.save = (
            operations.update()
            .where(operations.c.id == sa.bindparam("operation_id"), operations.c.owner == sa.bindparam("owned_by"))
            .values(
                step=sa.bindparam("step"),
                state=sa.bindparam("state"),
                selections=sa.bindparam("selections"),
                attempts=sa.bindparam("attempts"),
                error=sa.bindparam("error"),
                heartbeat=now,
                updated_at=now,  # the same moment: one statement, one time
            )
            .returning(operations.c.heartbeat)
        )
        self.by_id = operations.select().where(operations.c.id == sa.bindparam("operation_id"))
        self.beat = (
            operations.update()
            .where(operations.c.owner == sa.bindparam("beating"), operations.c.state == RUNNING)
            .values(heartbeat=now)
        )
        silent_for = now - sa.bindparam("dead_after", type_=sa.Float)
        self.silent = (
            operations.select()
            .where(
                operations.c.state == RUNNING,
                operations.c.owner != sa.bindparam("owner"),
                operations.c.heartbeat <= silent_for,
            )
            .order_by(operations.c.created_at)
        )
        self.take_over = (
            operations.update()
            .where(
                operations.c.id == sa.bindparam("operation_id"),
                operations.c.state == RUNNING,
                operations.c.owner == sa.bindparam("owner_was"),
                operations.c.heartbeat == sa.bindparam("heartbeat_was", type_=sa.Float),
                operations.c.heartbeat <= silent_for,
            )
            .values(owner=sa.bindparam("taker"), heartbeat=now)
        )


def read_through_failover(engine: Engine, query: Callable[[Connection], T]) -> T:
    """``query`` on a connection of its own; run again after a connection that broke or could not
    be made (a database restarting, or failing over to its standby), as the journal's writes are,
    for up to ``RETRY_SECONDS``: a read changes nothing, so running it again is always right."""
    deadline = time.monotonic() + RETRY_SECONDS
    attempt = 0
    while True:
        attempt += 1
        try:
            with engine.connect() as conn:
                return query(conn)
        except sa.exc.DBAPIError as error:
            if not connection_lost(error) or time.monotonic() > deadline:
                raise
        time.sleep(random.uniform(0, min(1.0, 0.02 * 2**attempt)))


def connection_lost(error: sa.exc.DBAPIError) -> bool:
    """A connection that broke or could not be made (psycopg's OperationalError: refused, closed,
    shutting down), after which the transaction may or may not have committed."""
    if error.connection_invalidated:
        return True
    return isinstance(error, sa.exc.OperationalError) and type(error.orig).__module__.startswith("psycopg")


def _json_text(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


# The JSON columns (an operation's request, selections and attempts, written at every step) through
# orjson: the standard library's encoder was a twentieth of a conductor's Python.
_JSON_CODEC: Final[dict[str, Any]] = {"json_serializer": _json_text, "json_deserializer": orjson.loads}


def _engine(url: str) -> Engine:
    if url.startswith(("postgresql://", "postgres://")):
        # The plain form an operator writes, as `berth serve` takes it: psycopg 3, the driver installed.
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    if not url.startswith("sqlite"):
        return sa.create_engine(url, **_JSON_CODEC)
    engine = sa.create_engine(
        url,
        **_JSON_CODEC,
        connect_args={"timeout": SQLITE_LOCK_WAIT, "check_same_thread": False},
        pool_size=SQLITE_CONNECTIONS,
        max_overflow=SQLITE_CONNECTIONS,
    )
    sa.event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: object) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    # A commit survives a crash of the conductor (what resume() is for); a power loss may lose the
    # last few, which only repeats steps, and every step is idempotent.
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()
