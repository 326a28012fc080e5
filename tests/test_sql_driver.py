"""Statements sent straight to the driver (``berth.sql.driver``), on both databases: the values a
statement fixed are filled in, typed parameters go through their bind processors (JSON), the rows
come back typed as SQLAlchemy types them, and a driver's error is SQLAlchemy's exception; a journal
write whose connection the server ended runs again on a new one, as it did through SQLAlchemy's
execution."""

from __future__ import annotations

import uuid

import psycopg
import pytest
import sqlalchemy as sa

from berth.conductor.journal import Journal
from berth.sql.driver import DriverStatement
from berth.store import rawsql

metadata = sa.MetaData()
notes = sa.Table(
    "driver_notes",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("body", sa.JSON, nullable=False),
    sa.Column("weight", sa.Float, nullable=False),
)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'driver.sqlite'}"
    return request.getfixturevalue("postgres_server").create_database(f"driver_{uuid.uuid4().hex[:8]}")


@pytest.fixture
def engine(url):
    made = sa.create_engine(url)
    metadata.create_all(made)
    yield made
    made.dispose()


def test_a_statement_fills_its_fixed_values_processes_json_and_returns_its_rows(engine):
    insert = DriverStatement(
        notes.insert()
        .values(id=sa.bindparam("id"), kind="note", body=sa.bindparam("body"), weight=2.5)
        .returning(notes.c.kind, notes.c.weight),
        engine.dialect,
    )
    body = {"hosts": ["a", "b"], "note": "ünïcode", "none": None}
    with engine.begin() as conn:
        assert insert.rows(conn, {"id": "n1", "body": body}) == [("note", 2.5)]
    update = DriverStatement(
        notes.update().where(notes.c.id == sa.bindparam("note_id")).values(weight=sa.bindparam("weight")),
        engine.dialect,
    )
    with engine.begin() as conn:
        assert update.rows(conn, {"note_id": "n1", "weight": 4.0}) == []
    with engine.connect() as conn:
        assert conn.execute(sa.select(notes.c.body, notes.c.weight)).one() == (body, 4.0)
    select = DriverStatement(notes.select().where(notes.c.id == sa.bindparam("note_id")), engine.dialect)
    with engine.connect() as conn:
        # Read back as SQLAlchemy types it: the JSON column parsed on either database.
        assert select.records(conn, {"note_id": "n1"}) == [{"id": "n1", "kind": "note", "body": body, "weight": 4.0}]
        assert select.records(conn, {"note_id": "none"}) == []


def test_a_drivers_error_is_sqlalchemys_and_the_transaction_writes_nothing(engine):
    insert = DriverStatement(
        notes.insert().values(id=sa.bindparam("id"), kind="note", body=sa.bindparam("body"), weight=1.0),
        engine.dialect,
    )
    with engine.begin() as conn:
        insert.rows(conn, {"id": "n1", "body": {}})
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
        insert.rows(conn, {"id": "n2", "body": {}})
        insert.rows(conn, {"id": "n1", "body": {}})
    with engine.connect() as conn:
        assert conn.execute(sa.select(notes.c.id)).scalars().all() == ["n1"]


def _end_connections(postgres_server, name: str) -> int:
    """The server ends every connection to database ``name``: how many it ended."""
    admin = postgres_server.admin_url.replace("postgresql+psycopg", "postgresql")
    with psycopg.connect(admin, autocommit=True) as c:
        ended = c.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s", (name,)
        ).fetchone()
    assert ended is not None
    return int(ended[0])


def _ended_by_the_server(postgres_server, name, conn) -> None:
    assert _end_connections(postgres_server, name) == 1


def _closed_under_it(postgres_server, name, conn) -> None:
    # psycopg then refuses even the connection's cursor.
    conn.connection.dbapi_connection.close()


@pytest.mark.parametrize("lose", [_ended_by_the_server, _closed_under_it])
def test_a_lost_connection_is_invalidated_and_said_lost(postgres_server, lose):
    name = f"driver_{uuid.uuid4().hex[:8]}"
    engine = sa.create_engine(postgres_server.create_database(name))
    metadata.create_all(engine)
    update = DriverStatement(notes.update().values(weight=sa.bindparam("weight")), engine.dialect)
    try:
        with engine.connect() as conn:
            conn.execute(sa.select(1))
            lose(postgres_server, name, conn)
            with pytest.raises(sa.exc.DBAPIError) as lost:
                update.rows(conn, {"weight": 1.0})
            # What the journal's writes and reads retry on (``berth.conductor.journal.connection_lost``).
            assert lost.value.connection_invalidated and conn.invalidated
    finally:
        engine.dispose()


def test_the_stores_plain_sql_says_a_connection_closed_under_it_is_lost(postgres_server):
    """``berth.store.rawsql`` takes its cursor the same way (``driver_cursor``)."""
    engine = sa.create_engine(postgres_server.create_database(f"driver_{uuid.uuid4().hex[:8]}"))
    try:
        with engine.connect() as conn:
            conn.execute(sa.select(1))
            conn.connection.dbapi_connection.close()
            with pytest.raises(sa.exc.DBAPIError) as lost:
                rawsql.fetch(conn, "SELECT 1")
            assert lost.value.connection_invalidated and conn.invalidated
    finally:
        engine.dispose()


def test_a_journal_save_whose_connection_the_server_ended_is_written_on_a_new_one(postgres_server):
    name = f"journal_{uuid.uuid4().hex[:8]}"
    journal = Journal(postgres_server.create_database(name))
    try:
        operation = journal.start("build", str(uuid.uuid4()), {"server": {}}, owner="me")
        assert _end_connections(postgres_server, name) >= 1  # the journal's pooled connection
        operation.step = "schedule"
        journal.save(operation)
        saved = journal.get(operation.id)
        assert saved is not None and saved.step == "schedule"
    finally:
        journal.close()
