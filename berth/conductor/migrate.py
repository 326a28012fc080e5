"""The conductors' database brought to the newest schema through Alembic (``migrations/``).

A journal opened upgrades its database (``berth conductor`` opens one in its master, before its
workers start), so that a release whose tables changed finds an older database and changes it in
place. Three cases:

- at the newest revision already (every start but the first after an upgrade): one read of the
  revision, and Alembic is not even imported (it would cost a restarted conductor a third of a
  second);
- empty: the tables made whole from their definitions, and marked as the newest revision, as
  Alembic advises for a new database (tests/conductor/test_conductor_migrations.py checks that the
  migrations make the same schema);
- older: the migrations it lacks. A database made before the conductors' tables had migrations
  (made whole by ``create_all``) is recognised by its tables and marked as the first revision, which
  it is, before the others run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import sqlalchemy as sa
from sqlalchemy import Connection

if TYPE_CHECKING:
    from alembic.config import Config

# The newest revision (a test checks it is the migrations' head).
HEAD: Final = "0004"
# The revision a database made before the migrations is at.
FIRST_REVISION: Final = "0001"
# Beside the service's ``alembic_version``, which a database both share would otherwise mix up.
VERSION_TABLE: Final = "conductor_alembic_version"
# Held while a PostgreSQL database is upgraded: conductors starting together upgrade it one by one.
_ADVISORY_LOCK: Final = 7478238


def alembic_config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", "berth.conductor:migrations")
    config.attributes["connection"] = connection
    return config


def recorded(conn: Connection) -> str | None:
    """The revision the database says it is at (None: none recorded)."""
    if not sa.inspect(conn).has_table(VERSION_TABLE):
        return None
    found: str | None = conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()
    return found


class SchemaTooNew(Exception):
    """The conductors' database is at a revision a later release wrote, which this one has no
    migration for (Alembic would only say it cannot locate it): what to do, in one line."""


def upgrade(conn: Connection, tables: Sequence[sa.MetaData]) -> None:
    """The database at the newest revision, on ``conn``, in the transaction it has begun and run
    nothing in yet; one conductor at a time. ``tables``: the definitions of every table of the
    newest revision, which an empty database is made from. :class:`SchemaTooNew` for a database a
    later release upgraded."""
    found = recorded(conn)
    if found == HEAD:
        return
    if found is not None and found not in _revisions():
        where = conn.engine.url.render_as_string(hide_password=True)
        raise SchemaTooNew(
            f"the conductors' database at {where} is at schema revision {found}, newer than this release knows "
            f"(newest {HEAD}): run the release that wrote it, or restore a backup taken before the upgrade"
        )
    if conn.dialect.name == "sqlite":
        # The write lock first, so that a second process waits here rather than finding half the
        # tables made (pysqlite begins no transaction of its own before DDL).
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    elif conn.dialect.name == "postgresql":
        conn.execute(sa.text(f"SELECT pg_advisory_xact_lock({_ADVISORY_LOCK})"))
    from alembic import command

    config = alembic_config(conn)
    if recorded(conn) is None:
        if not sa.inspect(conn).has_table("conductor_operations"):
            for metadata in tables:
                metadata.create_all(conn)
            command.stamp(config, "head")
            return
        command.stamp(config, FIRST_REVISION)
    command.upgrade(config, "head")


def _revisions() -> frozenset[str]:
    """Every revision this release has a migration for."""
    from alembic.script import ScriptDirectory

    return frozenset(script.revision for script in ScriptDirectory.from_config(alembic_config()).walk_revisions())
