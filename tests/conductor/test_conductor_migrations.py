"""The conductors' database and its migrations, on SQLite and PostgreSQL: a new database and one
upgraded through every migration have the tables the code defines; a database made before the
migrations (whole, by ``create_all``) is upgraded in place with its rows kept; a journal opened on
a database at the newest revision does not import Alembic."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from berth.conductor import migrate
from berth.conductor.journal import Journal
from berth.conductor.journal import metadata as journal_metadata
from berth.conductor.records.tables import metadata as records_metadata


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'conductors.sqlite'}"
    return request.getfixturevalue("postgres_server").create_database(f"migrations_{uuid.uuid4().hex[:8]}")


def _engine(url: str) -> sa.Engine:
    return sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))


def _differences(engine: sa.Engine) -> list:
    """What Alembic finds different between the database and the tables the code defines."""
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"version_table": migrate.VERSION_TABLE})
        found = compare_metadata(context, [journal_metadata, records_metadata])
    return [d for d in found if not (d[0] == "remove_table" and d[1].name == migrate.VERSION_TABLE)]


def _migrate(engine: sa.Engine, revision: str) -> None:
    with engine.begin() as conn:
        command.upgrade(migrate.alembic_config(conn), revision)


def test_the_newest_revision_named_in_the_code_is_the_migrations_head():
    assert ScriptDirectory.from_config(migrate.alembic_config()).get_current_head() == migrate.HEAD


def test_a_new_database_and_one_migrated_step_by_step_have_the_tables_the_code_defines(database_url, tmp_path):
    Journal(database_url).close()  # new: made whole and marked as the newest revision
    engine = _engine(database_url)
    with engine.connect() as conn:
        assert migrate.recorded(conn) == migrate.HEAD
    assert _differences(engine) == []
    engine.dispose()
    stepwise = _engine(f"sqlite:///{tmp_path / 'stepwise.sqlite'}")
    _migrate(stepwise, "head")
    assert _differences(stepwise) == []
    stepwise.dispose()


def test_a_database_made_before_the_migrations_is_upgraded_in_place_with_its_rows(database_url):
    engine = _engine(database_url)
    _migrate(engine, migrate.FIRST_REVISION)
    with engine.begin() as conn:
        # What ``create_all`` made before the migrations: the tables of the first revision, no version.
        conn.execute(sa.text(f"DROP TABLE {migrate.VERSION_TABLE}"))
        conn.execute(
            sa.text(
                "INSERT INTO conductor_hosts (name, url, zone, disabled, registered_by, registered_at, heartbeat) "
                "VALUES ('h1', 'http://h1', 'zone-7', false, 'agent', 0, 0)"
            )
        )
        for server, host in (("s-placed", "'h1'"), ("s-offloaded", "NULL")):
            conn.execute(
                sa.text(
                    "INSERT INTO conductor_servers (id, name, project_id, user_id, request, status, host, "
                    f"created_at, updated_at) VALUES ('{server}', '{server}', 'p', 'u', '{{}}', 'ACTIVE', {host}, 1, 1)"
                )
            )
        conn.execute(
            sa.text(
                "INSERT INTO conductor_operations (id, kind, instance_uuid, request, step, state, selections, "
                "attempts, owner, heartbeat, created_at, updated_at) "
                "VALUES ('op-1', 'build', 's-placed', '{}', 'done', 'done', '{}', '[]', 'c', 0, 1, 1)"
            )
        )
    journal = Journal(database_url)
    try:
        assert journal.get("op-1").state == "done"
    finally:
        journal.close()
    with engine.connect() as conn:
        assert migrate.recorded(conn) == migrate.HEAD
        zones = dict(conn.execute(sa.text("SELECT id, zone FROM conductor_servers")).all())
    # A server on a host takes its zone; one offloaded before keeps none (its last host unknown).
    assert zones == {"s-placed": "zone-7", "s-offloaded": None}
    assert _differences(engine) == []
    engine.dispose()


def test_a_journal_on_a_database_at_the_newest_revision_leaves_alembic_unimported(tmp_path):
    url = f"sqlite:///{tmp_path / 'conductors.sqlite'}"
    Journal(url).close()
    code = (
        "import sys; from berth.conductor.journal import Journal; Journal(sys.argv[1]).close(); "
        "print('alembic' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code, url], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
