"""How fixed SQL is written for each driver (``berth.store.rawsql``)."""

import datetime

import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.dialects.sqlite import DATETIME

from berth.store.rawsql import _translate, db_time, py_time

SQL = "SELECT id FROM t WHERE a = ? AND id IN {ids} AND b LIKE '%x'"


def test_sqlite_gets_one_placeholder_per_id():
    assert _translate(SQL, False, 3) == "SELECT id FROM t WHERE a = ? AND id IN (?,?,?) AND b LIKE '%x'"
    assert _translate(SQL, False, 0).endswith("id IN (NULL) AND b LIKE '%x'")


def test_postgresql_gets_one_array_typed_like_integer_id_columns():
    # An untyped list of small numbers would arrive as smallint[], which PostgreSQL cannot hash
    # against an integer column.
    assert (
        _translate(SQL, True, 0, True) == "SELECT id FROM t WHERE a = %s AND id = ANY(%s::integer[]) AND b LIKE '%%x'"
    )
    assert _translate(SQL, True, 0, False) == "SELECT id FROM t WHERE a = %s AND id = ANY(%s) AND b LIKE '%%x'"


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
