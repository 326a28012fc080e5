"""Writing the books of a database as a snapshot (berth.portability.format), streamed.

Everything is read in one transaction (REPEATABLE READ on PostgreSQL, a read transaction on SQLite),
so the snapshot is consistent however long it takes, and through cursors that fetch a batch at a
time, so memory stays the same whatever the size of the cloud.

The order of every section depends only on what the database holds, so that a snapshot imported and
exported again is the same file byte for byte: names and uuids sort in code-point order (``COLLATE
"C"`` on PostgreSQL, SQLite's own), and where the API lists things in the order they were created
(providers, resource classes, aggregates, consumers), the section keeps that order, which an import
gives the copy's rows again.
"""

from __future__ import annotations

import datetime
import itertools
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from typing import IO, TYPE_CHECKING, Any, Final, cast
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy import Connection

from berth.portability.format import FIELDS, KINDS, encode, header, timestamp
from berth.store.database import Database, DatabaseUnusable, normalise_url
from berth.store.migrate import newer_schema, recorded_revisions
from berth.store.rawsql import py_time
from berth.store.util import utcnow

if TYPE_CHECKING:
    import psycopg

# Called with a section's kind, the records written of it so far and how many it has.
Progress = Callable[[str, int, int], None]

_BATCH: Final = 5000

# ``{c}`` marks a text ordering that must be by code point; ``{greatest}`` is SQL's max of two values.
_CUSTOM = "SUBSTR(name, 1, 7) = 'CUSTOM_'"
_PROVIDER_ORDER = """
WITH RECURSIVE tree(id, sort_key, depth) AS (
    SELECT id, id, 0 FROM resource_providers WHERE parent_provider_id IS NULL
    UNION ALL
    SELECT c.id, {greatest}(t.sort_key, c.id), t.depth + 1
    FROM resource_providers c JOIN tree t ON c.parent_provider_id = t.id
)"""

# Each kind's query: its rows give the record's fields in the order of format.FIELDS, except the
# grouped kinds (a provider's traits or aggregates), whose rows are (provider, one name).
_QUERIES: Final[dict[str, str]] = {
    "resource_class": f"SELECT name FROM resource_classes WHERE {_CUSTOM} ORDER BY id",
    "trait": f"SELECT name FROM traits WHERE {_CUSTOM} ORDER BY id",
    "aggregate": "SELECT uuid FROM placement_aggregates ORDER BY id",
    # Parents before children, and otherwise in the order of creation: a provider sorts by the
    # highest id on its path from the root (its own id unless it was moved under a newer parent).
    "provider": _PROVIDER_ORDER
    + """
SELECT p.uuid, p.name, p.generation, parent.uuid, COALESCE(root.uuid, p.uuid)
FROM tree JOIN resource_providers p ON p.id = tree.id
LEFT JOIN resource_providers parent ON parent.id = p.parent_provider_id
LEFT JOIN resource_providers root ON root.id = p.root_provider_id
ORDER BY tree.sort_key, tree.depth, tree.id""",
    "inventory": """
SELECT p.uuid, rc.name, i.total, i.reserved, i.min_unit, i.max_unit, i.step_size, i.allocation_ratio
FROM inventories i
JOIN resource_providers p ON p.id = i.resource_provider_id
JOIN resource_classes rc ON rc.id = i.resource_class_id
ORDER BY p.uuid {c}, rc.name {c}""",
    "provider_traits": """
SELECT p.uuid, t.name FROM resource_provider_traits pt
JOIN resource_providers p ON p.id = pt.resource_provider_id
JOIN traits t ON t.id = pt.trait_id
ORDER BY p.uuid {c}, t.name {c}""",
    # A provider's aggregates in the order the API lists them (by creation).
    "provider_aggregates": """
SELECT p.uuid, a.uuid FROM resource_provider_aggregates pa
JOIN resource_providers p ON p.id = pa.resource_provider_id
JOIN placement_aggregates a ON a.id = pa.aggregate_id
ORDER BY p.uuid {c}, a.id""",
    "project": "SELECT external_id FROM projects ORDER BY id",
    "user": "SELECT external_id FROM users ORDER BY id",
    "consumer_type": "SELECT name FROM consumer_types ORDER BY id",
    "consumer": """
SELECT c.uuid, pr.external_id, u.external_id, ct.name, c.generation
FROM consumers c
JOIN projects pr ON pr.id = c.project_id
JOIN users u ON u.id = c.user_id
LEFT JOIN consumer_types ct ON ct.id = c.consumer_type_id
ORDER BY c.id""",
    "allocation": """
SELECT a.consumer_id, p.uuid, rc.name, a.used
FROM allocations a
JOIN resource_providers p ON p.id = a.resource_provider_id
JOIN resource_classes rc ON rc.id = a.resource_class_id
LEFT JOIN consumers c ON c.uuid = a.consumer_id
ORDER BY c.id, a.consumer_id {c}, p.uuid {c}, rc.name {c}""",
    "lease": """
SELECT consumer_uuid, expires_at, created_at, updated_at FROM allocation_leases ORDER BY consumer_uuid {c}""",
    "server_group": "SELECT uuid, policy FROM server_groups ORDER BY uuid {c}",
    "server_group_member": """
SELECT m.group_uuid, m.consumer_uuid, p.uuid FROM server_group_members m
LEFT JOIN resource_providers p ON p.id = m.root_provider_id
ORDER BY m.group_uuid {c}, m.consumer_uuid {c}""",
    "quota": """
SELECT project_id, NULLIF(user_id, ''), resource, hard_limit FROM quota_limits
ORDER BY project_id {c}, user_id {c}, resource {c}""",
    "priority": "SELECT consumer_uuid, priority FROM consumer_priorities ORDER BY consumer_uuid {c}",
    # In the order they were recorded, which an import keeps.
    "preemption": """
SELECT consumer_uuid, project_id, priority, root_provider_uuid, preempted_by, preempted_at FROM preemptions
ORDER BY id""",
}

_COUNTS: Final[dict[str, str]] = {
    "resource_class": f"SELECT COUNT(*) FROM resource_classes WHERE {_CUSTOM}",
    "trait": f"SELECT COUNT(*) FROM traits WHERE {_CUSTOM}",
    "aggregate": "SELECT COUNT(*) FROM placement_aggregates",
    "provider": "SELECT COUNT(*) FROM resource_providers",
    "inventory": "SELECT COUNT(*) FROM inventories",
    "provider_traits": "SELECT COUNT(DISTINCT resource_provider_id) FROM resource_provider_traits",
    "provider_aggregates": "SELECT COUNT(DISTINCT resource_provider_id) FROM resource_provider_aggregates",
    "project": "SELECT COUNT(*) FROM projects",
    "user": "SELECT COUNT(*) FROM users",
    "consumer_type": "SELECT COUNT(*) FROM consumer_types",
    "consumer": "SELECT COUNT(*) FROM consumers",
    "allocation": "SELECT COUNT(*) FROM allocations",
    "lease": "SELECT COUNT(*) FROM allocation_leases",
    "server_group": "SELECT COUNT(*) FROM server_groups",
    "server_group_member": "SELECT COUNT(*) FROM server_group_members",
    "quota": "SELECT COUNT(*) FROM quota_limits",
    "priority": "SELECT COUNT(*) FROM consumer_priorities",
    "preemption": "SELECT COUNT(*) FROM preemptions",
}

# Sections kept in tables a database may not have yet (an older schema): none there, then.
_OPTIONAL_TABLES: Final = {
    "lease": "allocation_leases",
    "server_group": "server_groups",
    "server_group_member": "server_group_members",
    "quota": "quota_limits",
    "priority": "consumer_priorities",
    "preemption": "preemptions",
}
_GROUPED: Final = {"provider_traits": "traits", "provider_aggregates": "aggregates"}
# The times of each kind that has some.
_TIMES: Final = {"lease": ("expires_at", "created_at", "updated_at"), "preemption": ("preempted_at",)}


# The table every Berth schema has from its first revision: without it, no books at all.
_BOOKS_TABLE: Final = "resource_classes"


class NoBooks(Exception):
    """The database has no Berth schema, so no books to export (and none were created to find out)."""

    def __init__(self, where: str, why: str):
        super().__init__(f"no Berth books at {where} ({why})")


class ConnectionLost(Exception):
    """The connection to a PostgreSQL server was lost under the export (the server stopped, restarted
    or failing over): what was written of the books is no snapshot."""

    def __init__(self, where: str, error: Exception):
        lines = [line.strip() for line in str(getattr(error, "orig", None) or error).splitlines() if line.strip()]
        reason = lines[0] if lines else type(error).__name__
        super().__init__(f"the connection to the database at {where} was lost during the export ({reason})")


def export_books(
    database: str | Database,
    out: IO[str],
    progress: Progress | None = None,
    *,
    exported_at: datetime.datetime | None = None,
) -> dict[str, int]:
    """Write the books of ``database`` (a URL or an open Database) to ``out``; the records of each kind.

    ``exported_at`` (naive UTC, default now) goes into the header only, so that two exports of the
    same books can be made identical.

    Raises ``NoBooks`` for a database without Berth's schema, and for a SQLite file that does not
    exist, which is then not created (nor its writer lock): an export only reads. Raises
    ``ConnectionLost`` when the connection to PostgreSQL is lost before the export is complete.
    """
    if isinstance(database, str):
        _refuse_sqlite_without_books(database)
    db = Database(database) if isinstance(database, str) else database
    where = db.engine.url.render_as_string(hide_password=True)
    try:
        with snapshot(db) as conn:
            if not sa.inspect(conn).has_table(_BOOKS_TABLE):
                raise NoBooks(where, "the database has no Berth schema")
            # A later release's schema may keep books this release does not know of: an export by
            # this one would leave them out of the file without a word.
            too_new = newer_schema(recorded_revisions(conn), f"the database at {where}")
            if too_new is not None:
                raise DatabaseUnusable(too_new)
            present = present_kinds(conn)
            counts = {kind: _count(conn, kind) if kind in present else 0 for kind in KINDS}
            out.write(header(exported_at or utcnow(), counts).decode())
            for kind in KINDS:
                if kind in present:
                    _write_section(conn, kind, counts[kind], out, progress)
    except (sa.exc.OperationalError, db.engine.dialect.loaded_dbapi.OperationalError) as error:
        # The sections are read through psycopg's own cursors, whose errors SQLAlchemy does not wrap.
        if db.is_sqlite:
            raise
        raise ConnectionLost(where, error) from error
    finally:
        if db is not database:
            db.dispose()
    return counts


def _refuse_sqlite_without_books(url: str) -> None:
    """Look at a SQLite file before it is opened as a Database, which would create the file and its
    writer lock: a URL that names no file, or a file without Berth's schema, has no books."""
    try:
        parsed = sa.engine.make_url(normalise_url(url))
    except sa.exc.ArgumentError:
        return  # Database refuses it, and says why
    path = parsed.database
    if parsed.get_backend_name() != "sqlite" or not path or path == ":memory:" or path.startswith("file:"):
        return
    where = parsed.render_as_string(hide_password=True)
    if not os.path.isfile(path):
        raise NoBooks(where, "no such SQLite file")
    # Read only: the file is not changed, and nothing is created beside it.
    try:
        with closing(sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=ro", uri=True)) as conn:
            found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (_BOOKS_TABLE,))
            missing = found.fetchone() is None
    except sqlite3.DatabaseError as error:
        raise NoBooks(where, f"not a SQLite database: {error}") from None
    if missing:
        raise NoBooks(where, "the database has no Berth schema")


class snapshot:  # noqa: N801 - used as a context manager, like contextlib's
    """A connection in one consistent read transaction for the duration."""

    def __init__(self, db: Database):
        self._db = db
        self._conn: Connection | None = None

    def __enter__(self) -> Connection:
        conn = self._db.connect()
        if not self._db.is_sqlite:
            conn = conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
        conn.begin()
        self._conn = conn
        return conn

    def __exit__(self, exc_type: type[BaseException] | None, *_exc: object) -> None:
        assert self._conn is not None  # set by __enter__
        try:
            self._conn.rollback()
        except sa.exc.DBAPIError:
            # A connection lost under the read cannot roll back either: the error that ended the
            # read says what happened, not this one.
            if exc_type is None:
                raise
        finally:
            self._conn.close()


def present_kinds(conn: Connection) -> set[str]:
    inspector = sa.inspect(conn)
    return {kind for kind in KINDS if kind not in _OPTIONAL_TABLES or inspector.has_table(_OPTIONAL_TABLES[kind])}


def _sql(conn: Connection, query: str) -> str:
    postgres = conn.dialect.name == "postgresql"
    return query.replace("{c}", 'COLLATE "C"' if postgres else "").replace(
        "{greatest}", "GREATEST" if postgres else "MAX"
    )


def _count(conn: Connection, kind: str) -> int:
    return int(conn.exec_driver_sql(_COUNTS[kind]).scalar_one())


def records(conn: Connection, kind: str) -> Iterator[dict[str, Any]]:
    """The records of one kind, in the file's order, read a batch at a time."""
    rows = _stream(conn, _sql(conn, _QUERIES[kind]))
    if kind in _GROUPED:
        field = _GROUPED[kind]
        for provider, group in itertools.groupby(rows, key=lambda row: row[0]):
            yield {"provider": provider, field: [row[1] for row in group]}
        return
    names = [name for name, _type, _nullable in FIELDS[kind]]
    for row in rows:
        record = dict(zip(names, row, strict=True))
        for name in _TIMES.get(kind, ()):
            moment = py_time(record[name])
            assert moment is not None  # NOT NULL columns
            record[name] = timestamp(moment)
        yield record


def _stream(conn: Connection, sql: str) -> Iterator[tuple[Any, ...]]:
    """The rows of ``sql``, fetched a batch at a time (on PostgreSQL through a server-side cursor)."""
    dbapi_connection = conn.connection.dbapi_connection
    assert dbapi_connection is not None  # held by the open connection
    if conn.dialect.name == "postgresql":
        pg = cast("psycopg.Connection[Any]", dbapi_connection)
        with pg.cursor(name="berth_export") as named:
            named.itersize = _BATCH
            named.execute(sql)
            yield from named
        return
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(sql)
        while batch := cursor.fetchmany(_BATCH):
            yield from batch
    finally:
        cursor.close()


def _write_section(conn: Connection, kind: str, total: int, out: IO[str], progress: Progress | None) -> None:
    done = 0
    lines: list[bytes] = []
    for record in records(conn, kind):
        lines.append(encode(kind, record))
        if len(lines) == _BATCH:
            out.write(b"".join(lines).decode())
            done += len(lines)
            lines.clear()
            if progress:
                progress(kind, done, total)
    out.write(b"".join(lines).decode())
    done += len(lines)
    if progress:
        progress(kind, done, total)
