"""Transactions as ``berth.store.database`` runs them, on the real databases."""
import pytest
import sqlalchemy as sa

from berth.store.rawsql import fetch_value


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


def test_postgresql_reads_and_single_statement_writes_run_without_begin(db):
    def work(conn):
        fetch_value(conn, "SELECT 1")
        conn.execute(sa.text("SELECT 1"))
        return _in_transaction(conn)

    expected = db.is_sqlite  # SQLite keeps BEGIN: its reads need one snapshot across statements
    assert db.read(work) is expected
    assert db.write_statement(work) is expected
    # The pooled connection is back to transactions for the next writer.
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
