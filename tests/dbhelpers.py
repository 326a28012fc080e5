"""The databases the tests run on: a SQLite file, or a database on the PostgreSQL server the test
session starts (the ``postgres_server`` fixture of tests/conftest.py), and how a test empties one.

Imported by name from here, never from ``conftest``: with a conftest.py in several test folders,
which module ``import conftest`` finds depends on what ran before."""

from __future__ import annotations

import io
import threading
import time
import uuid

import pytest

from berth.portability.importer import import_books
from berth.portability.synthetic import write_snapshot
from berth.store import schema
from berth.store.database import Database
from berth.store.migrate import sync_standard_names, upgrade

BACKENDS = ["sqlite", "postgresql"]


def make_database(backend: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> str:
    """The URL of a new, empty database of the given kind."""
    if backend == "sqlite":
        path = tmp_path_factory.mktemp("sqlite") / "berth.sqlite"
        return f"sqlite:///{path}"
    server = request.getfixturevalue("postgres_server")
    return str(server.create_database(f"berth_{uuid.uuid4().hex[:12]}"))


_MUTABLE_TABLES = [
    schema.quota_usage,
    schema.quota_counted_projects,
    schema.consumer_priorities,
    schema.preemptions,
    schema.quota_limits,
    schema.quota_projects,
    schema.allocations,
    schema.consumers,
    schema.inventories,
    schema.resource_provider_traits,
    schema.resource_provider_aggregates,
    schema.placement_aggregates,
    schema.projects,
    schema.users,
    schema.consumer_types,
]


def reset(db: Database) -> None:
    with db.engine.begin() as conn:
        for table in _MUTABLE_TABLES:
            conn.execute(table.delete())
        conn.execute(schema.resource_providers.update().values(parent_provider_id=None, root_provider_id=None))
        conn.execute(schema.resource_providers.delete())
        conn.execute(
            schema.resource_classes.delete().where(schema.resource_classes.c.name.like("CUSTOM\\_%", escape="\\"))
        )
        conn.execute(schema.traits.delete().where(schema.traits.c.name.like("CUSTOM\\_%", escape="\\")))
        sync_standard_names(conn)


def clear_groups_and_leases(db: Database) -> None:
    """The server groups and leases gone, which ``reset`` (the shared database's) knows nothing of."""
    with db.engine.begin() as conn:
        conn.execute(schema.server_group_members.delete())
        conn.execute(schema.server_groups.delete())
        conn.execute(schema.allocation_leases.delete())


def start_until_it_waits_on_a_lock(db, work) -> threading.Thread:
    """``work`` on a thread of its own, once it waits on a row lock (or has ended, or 30 s passed):
    PostgreSQL, where a test holds a row in one transaction and lets another meet it."""
    racer = threading.Thread(target=work)
    racer.start()
    deadline = time.monotonic() + 30
    while not _someone_waits_on_a_lock(db) and racer.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    return racer


def _someone_waits_on_a_lock(db) -> bool:
    with db.engine.connect() as watcher:
        return bool(
            watcher.exec_driver_sql(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
            ).scalar()
        )


def database_with_hosts(url: str, hosts: int) -> str:
    """``url``, its database made or upgraded and holding ``hosts`` hosts of a synthetic snapshot
    with their inventories and allocations (three per host)."""
    books = io.StringIO()
    write_snapshot(books, providers=hosts, allocations=3 * hosts)
    books.seek(0)
    db = Database(url)
    try:
        upgrade(db)
        import_books(db, books)
    finally:
        db.dispose()
    return url


def provider_count(url: str) -> int:
    """How many providers the database at ``url`` holds."""
    db = Database(url)
    try:
        with db.engine.connect() as conn:
            return int(conn.exec_driver_sql("SELECT COUNT(*) FROM resource_providers").scalar_one())
    finally:
        db.dispose()
