"""A write whose COMMIT lost its connection, on a real PostgreSQL: the outcome is resolved (the
transaction's mark in ``commit_marks``), never guessed.  A commit that landed is reported as done,
with the work's own result, and not run again; one that did not land is run again, once.  The
conductors' journal (its own engine) reads whether its ``start`` or ``take_over`` landed before
running it again.

A journal read whose connection cannot be made (a primary gone, its standby not yet promoted) is
tried again until the database answers.

The fault is put in the driver's commit: the real COMMIT runs (or not) and then the connection is
closed under the client, which is what a primary dying between writing the commit and answering
looks like from the client's side."""

from __future__ import annotations

import threading
import uuid

import psycopg
import pytest
import sqlalchemy as sa
from apihelpers import Api

from berth.api.app import PlacementApp
from berth.conductor.journal import Journal
from berth.domain.errors import Conflict
from berth.store.database import Database
from berth.store.migrate import upgrade
from berth.store.rawsql import attempt
from berth.store.write_edges import FinalStatement, commit_with, commits_with_statement


@pytest.fixture(scope="module")
def pg(postgres_server):
    db = Database(postgres_server.create_database(f"outcome_{uuid.uuid4().hex[:10]}"))
    upgrade(db)
    with db.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE probe (id serial PRIMARY KEY, note text NOT NULL)")
    yield db
    db.dispose()


def lose_connection_at_commit(db, monkeypatch, *, commit_first: bool, times: int = 1) -> list[int]:
    """The next ``times`` COMMITs run (``commit_first``) or not, then the connection is closed and
    the driver raises what it raises for a server gone away.  Returns a list counting the faults."""
    real = db.engine.dialect.do_commit
    faults: list[int] = []

    def do_commit(pooled):
        if len(faults) >= times:
            return real(pooled)
        faults.append(1)
        if commit_first:
            real(pooled)
        pooled.dbapi_connection.close()  # the driver's connection, under the pool's wrapper
        raise psycopg.OperationalError("consuming input failed: server closed the connection unexpectedly")

    monkeypatch.setattr(db.engine.dialect, "do_commit", do_commit)
    return faults


def probe_rows(db, note):
    with db.engine.connect() as conn:
        return conn.execute(sa.text("SELECT id FROM probe WHERE note = :n ORDER BY id"), {"n": note}).scalars().all()


def insert_probe(note, runs):
    def work(conn):
        runs.append(1)
        return conn.execute(sa.text("INSERT INTO probe (note) VALUES (:n) RETURNING id"), {"n": note}).scalar_one()

    return work


@pytest.mark.parametrize("how", ["write", "write_statement"])
def test_a_commit_that_landed_is_reported_done_and_not_run_again(pg, monkeypatch, how):
    note, runs = uuid.uuid4().hex, []
    faults = lose_connection_at_commit(pg, monkeypatch, commit_first=True)
    returned = getattr(pg, how)(insert_probe(note, runs))
    assert faults == [1]
    assert len(runs) == 1
    assert probe_rows(pg, note) == [returned]


def test_a_commit_that_did_not_land_is_run_again_once(pg, monkeypatch):
    note, runs = uuid.uuid4().hex, []
    faults = lose_connection_at_commit(pg, monkeypatch, commit_first=False)
    returned = pg.write(insert_probe(note, runs))
    assert faults == [1]
    assert len(runs) == 2
    assert probe_rows(pg, note) == [returned]


def test_a_connection_lost_before_the_commit_runs_the_work_again_without_resolving(pg, monkeypatch):
    """The mark is the transaction's first statement, but only a lost COMMIT is resolved through it:
    a connection lost in the work itself cannot have committed anything, and no fenced mark is written."""
    note, runs = uuid.uuid4().hex, []
    resolved: list[str] = []
    real_committed = pg._committed
    monkeypatch.setattr(pg, "_committed", lambda token, lost: resolved.append(token) or real_committed(token, lost))

    def work(conn):
        runs.append(1)
        if len(runs) == 1:
            conn.connection.dbapi_connection.close()
        return conn.execute(sa.text("INSERT INTO probe (note) VALUES (:n) RETURNING id"), {"n": note}).scalar_one()

    def fenced():
        with pg.engine.connect() as conn:
            return conn.exec_driver_sql("SELECT COUNT(*) FROM commit_marks WHERE fenced").scalar_one()

    before = fenced()
    returned = pg.write(work)
    assert len(runs) == 2
    assert resolved == []
    assert probe_rows(pg, note) == [returned]
    assert fenced() == before


@pytest.mark.parametrize("commit", [True, False])
def test_a_lost_commit_still_running_is_waited_for(pg, commit):
    """The resolver's fencing insert waits for the transaction that holds the mark uncommitted."""
    token = uuid.uuid4().hex
    conninfo = pg.engine.url.render_as_string(hide_password=False).replace("postgresql+psycopg", "postgresql")
    answer: list[bool] = []
    with psycopg.connect(conninfo) as other:
        other.execute("INSERT INTO commit_marks (token, fenced, created_at) VALUES (%s, false, now())", (token,))
        resolver = threading.Thread(target=lambda: answer.append(pg._committed(token, None)))
        resolver.start()
        if commit:
            other.commit()
        else:
            other.rollback()
        resolver.join(timeout=30)
    assert answer == [commit]


def test_an_allocation_whose_commit_landed_is_acknowledged_once(pg, monkeypatch):
    """Through the API: PUT /allocations with a consumer generation.  Run again after its COMMIT
    landed, it would meet its own new generation and answer 409 for a write that took effect."""
    api = Api(PlacementApp(pg))
    rp = api.create_provider(inventory={"VCPU": {"total": 8}})
    consumer = str(uuid.uuid4())
    body = {
        "allocations": {rp: {"resources": {"VCPU": 2}}},
        "project_id": str(uuid.uuid4()),
        "user_id": str(uuid.uuid4()),
        "consumer_generation": None,
        "consumer_type": "INSTANCE",
    }
    assert api.put(f"/allocations/{consumer}", body).status_code == 204
    body["allocations"][rp]["resources"]["VCPU"] = 3
    body["consumer_generation"] = 1
    faults = lose_connection_at_commit(pg, monkeypatch, commit_first=True)
    r = api.put(f"/allocations/{consumer}", body)
    assert faults == [1]
    assert r.status_code == 204, r.data
    held = api.get(f"/allocations/{consumer}").json_body
    assert held["consumer_generation"] == 2
    assert held["allocations"][rp]["resources"] == {"VCPU": 3}


@pytest.fixture
def journal(pg):
    journal = Journal(pg.engine.url.render_as_string(hide_password=False))
    yield journal
    journal.close()


def test_a_journal_start_whose_commit_landed_returns_the_operation_once(journal, monkeypatch):
    instance = str(uuid.uuid4())
    faults = lose_connection_at_commit(journal, monkeypatch, commit_first=True)
    operation = journal.start("build", instance, {}, owner="me")
    assert faults == [1]
    assert [o.id for o in journal.for_instance(instance)] == [operation.id]


def test_a_journal_take_over_whose_commit_landed_reports_it_taken(journal, monkeypatch):
    operation = journal.start("build", str(uuid.uuid4()), {}, owner="dead")
    faults = lose_connection_at_commit(journal, monkeypatch, commit_first=True)
    taken = journal.take_over(operation, "successor", 0.0)
    assert faults == [1]
    assert taken is not None and taken.owner == "successor"


def test_a_journal_take_over_whose_commit_did_not_land_runs_again(journal, monkeypatch):
    operation = journal.start("build", str(uuid.uuid4()), {}, owner="dead")
    faults = lose_connection_at_commit(journal, monkeypatch, commit_first=False)
    taken = journal.take_over(operation, "successor", 0.0)
    assert faults == [1]
    assert taken is not None and taken.owner == "successor"


def test_a_journal_read_that_cannot_connect_waits_for_the_database(journal, monkeypatch):
    """While the primary is gone and the standby not yet promoted, new connections fail (refused, or
    the standby's "session is read-only"); a conductor's resume() reads the running operations then."""
    operation = journal.start("build", str(uuid.uuid4()), {}, owner="dead")
    journal.engine.dispose()  # every read below needs a new connection
    real = journal.engine.dialect.connect
    faults: list[int] = []

    def connect(*args, **kwargs):
        if len(faults) < 2:
            faults.append(1)
            raise psycopg.OperationalError(
                'connection failed: connection to server at "127.0.0.1" failed: ' + "session is read-only"
            )
        return real(*args, **kwargs)

    monkeypatch.setattr(journal.engine.dialect, "connect", connect)
    assert operation.id in [o.id for o in journal.running()]
    assert faults == [1, 1]
    journal.engine.dispose()
    faults.clear()
    assert journal.get(operation.id).owner == "dead"
    journal.engine.dispose()
    faults.clear()
    assert [o.id for o in journal.for_instance(operation.instance_uuid)] == [operation.id]


def test_a_kept_connection_the_server_ended_is_replaced_by_the_next_write(pg):
    """The server ends a thread's kept connection between two units (a restart, a failover): the
    next write's first statement, BEGIN with the mark, finds it gone, and the write runs again on
    a new connection."""
    note, runs = uuid.uuid4().hex, []
    backend = pg.read(lambda conn: conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())
    with pg.engine.connect() as other:
        assert other.exec_driver_sql(f"SELECT pg_terminate_backend({int(backend)})").scalar_one() is True
    returned = pg.write(insert_probe(note, runs))
    assert len(runs) == 1  # the work itself ran once: the failure came before it
    assert probe_rows(pg, note) == [returned]
    assert pg.read(lambda conn: conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()) != backend


def test_a_connection_lost_inside_a_claims_savepoint_runs_the_write_again(pg):
    """A pick's try at a tree runs in a SAVEPOINT (``rawsql.attempt``): the connection lost there
    cannot be rolled back to it, and the loss, not a complaint about the lost transaction, reaches
    the retry."""
    note, runs = uuid.uuid4().hex, []

    def work(conn):
        runs.append(1)
        with attempt(conn):
            if len(runs) == 1:
                backend = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
                with pg.engine.connect() as other:
                    other.exec_driver_sql(f"SELECT pg_terminate_backend({int(backend)})")
            return conn.execute(sa.text("INSERT INTO probe (note) VALUES (:n) RETURNING id"), {"n": note}).scalar_one()

    returned = pg.write(work)
    assert len(runs) == 2
    assert probe_rows(pg, note) == [returned]


def leave_final_statement(note, runs, final_sql):
    """A write that inserts ``note`` and leaves ``final_sql(run)`` to go with its COMMIT
    (``write_edges.commit_with``)."""

    def work(conn):
        runs.append(1)
        assert commits_with_statement(conn)  # a thread's kept connection, its transaction begun by the mark
        conn.execute(sa.text("INSERT INTO probe (note) VALUES (:n)"), {"n": note})
        commit_with(conn, FinalStatement(final_sql(len(runs)), on_rows=lambda rows: None, refusal=lambda e: None))
        return len(runs)

    return work


def test_a_final_statement_whose_commit_landed_is_reported_done_and_not_run_again(pg, monkeypatch):
    """The statement and the COMMIT run, and then the connection is closed under the client."""
    real = psycopg.Cursor.execute
    faults = []

    def execute(self, query, *args, **kwargs):
        sent = real(self, query, *args, **kwargs)
        if isinstance(query, str) and query.endswith("; COMMIT") and not faults:
            faults.append(1)
            self.connection.close()
            raise psycopg.OperationalError("consuming input failed: server closed the connection unexpectedly")
        return sent

    monkeypatch.setattr(psycopg.Cursor, "execute", execute)
    note, runs = uuid.uuid4().hex, []
    returned = pg.write(leave_final_statement(note, runs, lambda run: "SELECT 1"))
    assert faults == [1]
    assert returned == 1 and len(runs) == 1
    assert len(probe_rows(pg, note)) == 1


def test_a_final_statement_lost_before_its_commit_runs_the_write_again_once(pg):
    """The server ends the connection while it runs the statement, before the COMMIT."""
    note, runs = uuid.uuid4().hex, []
    end_me = "SELECT pg_terminate_backend(pg_backend_pid())"
    returned = pg.write(leave_final_statement(note, runs, lambda run: end_me if run == 1 else "SELECT 1"))
    assert returned == 2 and len(runs) == 2
    assert len(probe_rows(pg, note)) == 1


def test_a_final_statement_that_fails_is_raised_as_its_refusal_and_nothing_is_committed(pg):
    note, runs = uuid.uuid4().hex, []

    def work(conn):
        runs.append(1)
        conn.execute(sa.text("INSERT INTO probe (note) VALUES (:n)"), {"n": note})
        refused = Conflict("refused by the final statement")
        commit_with(conn, FinalStatement("SELECT 1 / 0", on_rows=lambda rows: None, refusal=lambda e: refused))

    with pytest.raises(Conflict, match="refused by the final statement"):
        pg.write(work)
    assert len(runs) == 1 and probe_rows(pg, note) == []
    # The connection is sound, and the next write commits.
    returned = pg.write(insert_probe(note, runs))
    assert probe_rows(pg, note) == [returned]
