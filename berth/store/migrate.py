"""Schema creation and upgrade through Alembic, then the standard names every database must hold."""

from __future__ import annotations

import datetime
import importlib.util
from pathlib import Path
from types import ModuleType

import os_resource_classes
import os_traits
import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from berth.store import schema
from berth.store.database import Database


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


def upgrade(db: Database) -> None:
    """Bring the schema to the newest revision and make sure every standard name exists.

    Safe to run from several processes at once: on SQLite the write lock serialises them, on
    PostgreSQL an advisory lock does.
    """
    with db.connect() as conn:
        if db.is_sqlite:
            conn = conn.execution_options(berth_write=True)
        with conn.begin():
            if not db.is_sqlite:
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(7478237)"))
            command.upgrade(alembic_config(conn), "head")
            sync_standard_names(conn)


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
