"""Schema creation and upgrade through Alembic, then the standard names every database must hold."""

from __future__ import annotations

import datetime
import importlib.util
from functools import cache
from pathlib import Path
from types import ModuleType

import os_resource_classes
import os_traits
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory

from berth.store import schema
from berth.store.database import Database, DatabaseUnusable, describe_failure


def earlier_migration(filename: str) -> ModuleType:
    """An earlier migration's module, by its file name, for a later one that builds on its SQL."""
    path = Path(__file__).with_name("migrations") / "versions" / filename
    spec = importlib.util.spec_from_file_location(f"berth_migration_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def alembic_config(connection: sa.Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", "berth.store:migrations")
    config.attributes["connection"] = connection
    return config


@cache
def newest_revisions() -> frozenset[str]:
    """The heads of the migrations this code ships (read once: they cannot change while it runs)."""
    return frozenset(ScriptDirectory.from_config(alembic_config()).get_heads())


@cache
def _known_revisions() -> frozenset[str]:
    return frozenset(script.revision for script in ScriptDirectory.from_config(alembic_config()).walk_revisions())


def recorded_revisions(conn: sa.Connection) -> frozenset[str]:
    """The revisions Alembic recorded (read directly: its migration context logs each time it starts)."""
    if not sa.inspect(conn).has_table("alembic_version"):
        return frozenset()
    return frozenset(conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars())


def newer_schema(recorded: frozenset[str], database: str = "the database") -> str | None:
    """What to do about a database a later release upgraded, whose revision this code has no
    migration for (Alembic only says it cannot locate it), or None for any other."""
    unknown = recorded - _known_revisions()
    if not unknown:
        return None
    return (
        f"{database} is at schema revision {', '.join(sorted(unknown))}, newer than this release knows "
        f"(newest {', '.join(sorted(newest_revisions()))}): run the release that wrote it, or restore a "
        "backup taken before the upgrade"
    )


def upgrade(db: Database) -> None:
    """Bring the schema to the newest revision and make sure every standard name exists.

    Safe to run from several processes at once: on SQLite the write lock serialises them, on
    PostgreSQL an advisory lock does. :class:`DatabaseUnusable` for a schema newer than this code's.
    """
    with db.connect() as conn:
        if db.is_sqlite:
            conn = conn.execution_options(berth_write=True)
        try:
            # On SQLite, BEGIN IMMEDIATE: the write lock, which another process may hold too long.
            transaction = conn.begin()
        except sa.exc.OperationalError as error:
            raise DatabaseUnusable(describe_failure(error, db.given_url)) from error
        with transaction:
            if not db.is_sqlite:
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(7478237)"))
            too_new = newer_schema(
                recorded_revisions(conn), f"the database at {db.engine.url.render_as_string(hide_password=True)}"
            )
            if too_new is not None:
                raise DatabaseUnusable(too_new)
            command.upgrade(alembic_config(conn), "head")
            sync_standard_names(conn)
            if db.is_sqlite:
                _check_writable(conn, db)


def _check_writable(conn: sa.Connection, db: Database) -> None:
    """One write that changes nothing: SQLite opens a file it may not write (its permissions, a
    read-only mount, an immutable file) read-only and serves its reads, and an upgrade with nothing
    to do writes nothing, so the server started and answered every write 500."""
    try:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = version_num"))
    except sa.exc.OperationalError as error:
        raise DatabaseUnusable(describe_failure(error, db.given_url)) from error


def sync_standard_names(conn: sa.Connection) -> None:
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    for table, names in (
        (schema.resource_classes, os_resource_classes.STANDARDS),
        (schema.traits, os_traits.get_traits()),
    ):
        existing = set(conn.execute(sa.select(table.c.name)).scalars())
        missing = [n for n in names if n not in existing]
        if missing:
            conn.execute(
                table.insert(),
                [{"name": n, "created_at": now, "updated_at": now} for n in missing],
            )
