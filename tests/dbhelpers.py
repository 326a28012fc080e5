"""The databases the tests run on: a SQLite file, or a database on the PostgreSQL server the test
session starts (the ``postgres_server`` fixture of tests/conftest.py), and how a test empties one.

Imported by name from here, never from ``conftest``: with a conftest.py in several test folders,
which module ``import conftest`` finds depends on what ran before."""

from __future__ import annotations

import uuid

import pytest

from berth.store import schema
from berth.store.database import Database
from berth.store.migrate import sync_standard_names

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
