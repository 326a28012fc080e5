"""How fixed SQL is written for each driver (``berth.store.rawsql``)."""

import datetime
import sqlite3

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.dialects.sqlite import DATETIME

from berth.store.rawsql import attempt, db_time, execute, insert_rows, py_time, translate

SQL = "SELECT id FROM t WHERE a = ? AND id IN {ids} AND b LIKE '%x'"


def test_sqlite_gets_one_placeholder_per_id():
    assert translate(SQL, False, 3) == "SELECT id FROM t WHERE a = ? AND id IN (?,?,?) AND b LIKE '%x'"
    assert translate(SQL, False, 0).endswith("id IN (NULL) AND b LIKE '%x'")


def test_postgresql_gets_one_array_typed_like_integer_id_columns():
    # An untyped list of small numbers would arrive as smallint[], which PostgreSQL cannot hash
    # against an integer column.
    assert translate(SQL, True, 0, True) == "SELECT id FROM t WHERE a = %s AND id = ANY(%s::integer[]) AND b LIKE '%%x'"
    assert translate(SQL, True, 0, False) == "SELECT id FROM t WHERE a = %s AND id = ANY(%s) AND b LIKE '%%x'"


_SQLITE = sa.create_engine("sqlite://")
_SQLALCHEMY_SQLITE_TIME = DATETIME().bind_processor(_SQLITE.dialect)


@given(st.datetimes())
def test_sqlite_times_are_written_as_sqlalchemy_writes_them(moment):
    # Rows written by raw SQL and by SQLAlchemy Core must compare and sort alike.
    with _SQLITE.connect() as conn:
        written = db_time(conn, moment)
    assert written == _SQLALCHEMY_SQLITE_TIME(moment)
    assert py_time(written) == moment


def test_postgresql_times_go_to_the_driver_as_they_are():
    moment = datetime.datetime(2026, 11, 22, 23, 30, 1, 5)
    engine = sa.create_engine("postgresql+psycopg://")  # never connects
    assert db_time(engine, moment) is moment


def _scratch(db):
    with db.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE IF EXISTS scratch_rows")
        conn.exec_driver_sql("CREATE TABLE scratch_rows (id INTEGER PRIMARY KEY, note VARCHAR(40) NOT NULL)")


def _notes(db):
    with db.engine.connect() as conn:
        return [tuple(row) for row in conn.exec_driver_sql("SELECT id, note FROM scratch_rows ORDER BY id")]


def test_insert_rows_writes_every_row_across_chunks(db):
    # More rows than one PostgreSQL statement takes: the rest go in further statements.
    _scratch(db)
    rows = [(i, f"n{i}") for i in range(2_345)]
    db.write(lambda conn: insert_rows(conn, "INSERT INTO scratch_rows (id, note)", "(?, ?)", rows))
    db.write(lambda conn: insert_rows(conn, "INSERT INTO scratch_rows (id, note)", "(?, ?)", []))
    assert _notes(db) == rows


def test_insert_rows_keeps_each_sqlite_statement_within_its_parameter_limit(db):
    if not db.is_sqlite:
        pytest.skip("SQLite's limit on a statement's parameters")
    _scratch(db)
    rows = [(i, f"n{i}") for i in range(25)]

    def insert(conn):
        dbapi_connection = conn.connection.dbapi_connection
        before = dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 7)
        try:
            # Three rows of two parameters a statement: nine statements, the last of one row.
            insert_rows(conn, "INSERT INTO scratch_rows (id, note)", "(?, ?)", rows)
        finally:
            dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, before)

    db.write(insert)
    assert _notes(db) == rows


def test_an_attempt_that_raises_is_undone_alone_and_nested_attempts_each_undo_their_own(db):
    _scratch(db)
    add = "INSERT INTO scratch_rows (id, note) VALUES (?, ?)"

    def work(conn):
        with attempt(conn):
            execute(conn, add, (1, "kept"))
        with pytest.raises(KeyError), attempt(conn):
            execute(conn, add, (2, "undone"))
            raise KeyError("refused")
        with pytest.raises(ValueError), attempt(conn):
            execute(conn, add, (3, "outer, undone"))
            with pytest.raises(KeyError), attempt(conn):
                execute(conn, add, (4, "inner, undone"))
                raise KeyError("inner refused")
            execute(conn, add, (5, "outer after inner, undone"))
            raise ValueError("outer refused")
        with attempt(conn):
            execute(conn, add, (6, "kept after"))
            with pytest.raises(KeyError), attempt(conn):
                execute(conn, add, (7, "inner, undone"))
                raise KeyError("inner refused")

        with pytest.raises(sa.exc.IntegrityError), attempt(conn):
            execute(conn, add, (1, "the database refuses"))  # on PostgreSQL, the transaction is aborted
        execute(conn, add, (8, "after the database refused"))

    db.write(work)
    assert _notes(db) == [(1, "kept"), (6, "kept after"), (8, "after the database refused")]
