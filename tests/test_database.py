"""Transactions as ``berth.store.database`` runs them, on the real databases."""

import pytest
import sqlalchemy as sa

from berth.store.rawsql import fetch_value
from berth.store.write_edges import local_setting


def _in_transaction(conn) -> bool:
    """Whether the driver has a transaction open on this connection now."""
    dbapi_connection = conn.connection.dbapi_connection
    if conn.dialect.name == "sqlite":
        return dbapi_connection.in_transaction
    return dbapi_connection.info.transaction_status != 0  # psycopg's IDLE


def test_writes_run_in_a_transaction(db):
    def work(conn):
        fetch_value(conn, "SELECT 1")
        return _in_transaction(conn)

    assert db.write(work) is True


def test_postgresql_reads_run_without_begin_and_every_write_in_a_transaction(db):
    def work(conn):
        fetch_value(conn, "SELECT 1")
        conn.execute(sa.text("SELECT 1"))
        return _in_transaction(conn)

    expected = db.is_sqlite  # SQLite keeps BEGIN: its reads need one snapshot across statements
    assert db.read(work) is expected
    # Single-statement writes too: on PostgreSQL the transaction carries the mark that resolves a
    # lost COMMIT (tests/test_commit_outcome.py).
    assert db.write_statement(work) is True
    assert db.write(work) is True


def test_failed_work_leaves_no_transaction_and_no_autocommit_behind(db):
    def failing(conn):
        fetch_value(conn, "SELECT 1")
        raise RuntimeError("boom")

    for run in (db.read, db.write_statement, db.write):
        with pytest.raises(RuntimeError):
            run(failing)

    def work(conn):
        fetch_value(conn, "SELECT 1")
        return _in_transaction(conn)

    assert db.write(work) is True


def _dbapi(conn):
    return conn.connection.dbapi_connection


def test_a_thread_keeps_its_connection_between_units_of_work(db):
    first = db.read(_dbapi)
    assert db.write(_dbapi) is first
    assert db.write_statement(_dbapi) is first
    assert db.engine.pool.checkedout() == 1


def test_a_unit_nested_in_another_gets_a_connection_of_its_own(db):
    def outer(conn):
        inner = db.read(lambda c: (_dbapi(c), fetch_value(c, "SELECT 2")))
        return _dbapi(conn), inner

    outer_connection, (inner_connection, value) = db.write(outer)
    assert value == 2
    assert inner_connection is not outer_connection
    assert db.read(_dbapi) is outer_connection  # the kept one, free again
    assert db.engine.pool.checkedout() == 1


def test_a_failure_gives_the_connection_back_but_a_refusal_keeps_it(db):
    from berth.domain.errors import NotFound

    kept = db.read(_dbapi)

    def refused(conn):
        fetch_value(conn, "SELECT 1")
        raise NotFound("no such thing")

    with pytest.raises(NotFound):
        db.write(refused)
    assert db.read(_dbapi) is kept

    def broken(conn):
        fetch_value(conn, "SELECT no_such_column FROM resource_providers")

    with pytest.raises(sa.exc.DBAPIError):
        db.write(broken)
    assert db.engine.pool.checkedout() == 0
    assert db.read(lambda conn: fetch_value(conn, "SELECT 3")) == 3


def test_connections_go_back_when_their_thread_ends_and_on_dispose(db):
    import threading

    db.read(_dbapi)
    kept_by_thread = []
    thread = threading.Thread(target=lambda: kept_by_thread.append(db.read(_dbapi)))
    thread.start()
    thread.join()
    assert db.engine.pool.checkedout() == 1  # the ended thread's went back
    if not db.is_sqlite:
        # Given back as the pool hands connections out, with transactions (the collector alone
        # would return it as it was kept, in autocommit).
        assert kept_by_thread[0].autocommit is False
    db.dispose()
    assert db.engine.pool.checkedout() == 0
    assert db.read(lambda conn: fetch_value(conn, "SELECT 4")) == 4


def test_core_statements_in_autocommit_leave_the_kept_connection_usable(db):
    def work(conn):
        conn.execute(sa.text("SELECT 1"))
        return _in_transaction(conn)

    db.read(work)
    assert db.write(work) is True


def test_a_sqlite_read_after_a_write_does_not_take_the_write_lock(db):
    if not db.is_sqlite:
        pytest.skip("SQLite's write lock")
    import sqlite3

    db.write(lambda conn: fetch_value(conn, "SELECT 1"))

    def read_while_another_writes(conn):
        fetch_value(conn, "SELECT count(*) FROM resource_providers")
        other = sqlite3.connect(db.engine.url.database, timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # refused at once if this read held the write lock
            other.execute("COMMIT")
        finally:
            other.close()
        return True

    assert db.read(read_while_another_writes) is True


def test_a_kept_postgresql_connection_goes_back_to_the_pool_out_of_autocommit(db):
    if db.is_sqlite:
        pytest.skip("psycopg's autocommit")
    kept = db.read(_dbapi)
    assert kept.autocommit is True  # kept so between units that need no transaction
    # A write begins its transaction itself, with its commit mark, on the connection kept in autocommit.
    in_write = db.write(lambda conn: (_dbapi(conn).autocommit, _dbapi(conn).info.transaction_status.name))
    assert in_write == (True, "INTRANS")
    db.read(_dbapi)
    db.dispose()
    assert kept.autocommit is False
    with db.engine.connect() as conn:
        assert conn.connection.dbapi_connection.autocommit is False


def test_only_as_many_threads_keep_a_connection_as_the_pool_holds(db):
    import threading

    from berth.store.database import Database

    small = Database(db.url, pool_size=2)
    ran, finish = threading.Barrier(4), threading.Event()
    values = []

    def client():
        values.append(small.read(lambda conn: fetch_value(conn, "SELECT 5")))
        ran.wait(timeout=30)
        finish.wait(timeout=30)

    threads = [threading.Thread(target=client) for _ in range(3)]
    try:
        for thread in threads:
            thread.start()
        ran.wait(timeout=30)
        # Two threads keep theirs; the third gave its connection back after its unit of work.
        assert small.engine.pool.checkedout() == 2
    finally:
        finish.set()
        for thread in threads:
            thread.join()
        small.dispose()
    assert values == [5, 5, 5]


@pytest.mark.parametrize("failure", ["refusal", "database error"])
def test_a_write_that_fails_leaves_nothing_and_the_next_write_commits(db, failure):
    from berth.domain.errors import Conflict

    with db.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE IF EXISTS scratch_writes")
        conn.exec_driver_sql("CREATE TABLE scratch_writes (id INTEGER PRIMARY KEY)")

    def failing(conn):
        conn.exec_driver_sql("INSERT INTO scratch_writes (id) VALUES (1)")
        if failure == "refusal":
            raise Conflict("refused")
        conn.exec_driver_sql("INSERT INTO scratch_writes (id) VALUES (1)")  # a duplicate key

    with pytest.raises(Conflict if failure == "refusal" else sa.exc.IntegrityError):
        db.write(failing)
    db.write(lambda conn: conn.exec_driver_sql("INSERT INTO scratch_writes (id) VALUES (2)"))
    assert db.read(lambda conn: [row[0] for row in conn.exec_driver_sql("SELECT id FROM scratch_writes")]) == [2]


def test_a_writes_settings_hold_for_its_transaction_alone_kept_or_not(db):
    if db.is_sqlite:
        pytest.skip("PostgreSQL's transaction-local settings")
    value = "it's set, C:\\"  # quoted by the driver
    settings = {"berth.probe": value}

    def current(conn):
        return fetch_value(conn, "SELECT current_setting('berth.probe', true)"), local_setting("berth.probe")

    assert db.write(current, settings=settings) == (value, value)  # the thread's kept connection
    assert db.write(current)[1] is None
    assert db.read(lambda conn: fetch_value(conn, "SELECT current_setting('berth.probe', true)")) in (None, "")
    # A write nested in another runs on a connection of its own, the setting sent as a statement.
    nested = db.read(lambda conn: db.write(current, settings=settings))
    assert nested == (value, value)


def test_postgresql_connections_compile_no_statement_just_in_time(db):
    """A plan's cost estimate, not its run, decides JIT: on a freshly loaded database it compiled
    statements of 0.2 ms for several ms each. Every connection, read or write, turns it off."""
    if db.is_sqlite:
        pytest.skip("PostgreSQL's setting")
    assert db.read(lambda conn: fetch_value(conn, "SHOW jit")) == "off"
    assert db.write(lambda conn: fetch_value(conn, "SHOW jit")) == "off"
    with db.connect() as conn:
        assert fetch_value(conn, "SHOW jit") == "off"
