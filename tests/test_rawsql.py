"""How fixed SQL is written for each driver (``berth.store.rawsql``)."""
from berth.store.rawsql import _translate

SQL = "SELECT id FROM t WHERE a = ? AND id IN {ids} AND b LIKE '%x'"


def test_sqlite_gets_one_placeholder_per_id():
    assert _translate(SQL, False, 3) == "SELECT id FROM t WHERE a = ? AND id IN (?,?,?) AND b LIKE '%x'"
    assert _translate(SQL, False, 0).endswith("id IN (NULL) AND b LIKE '%x'")


def test_postgresql_gets_one_array_typed_like_integer_id_columns():
    # An untyped list of small numbers would arrive as smallint[], which PostgreSQL cannot hash
    # against an integer column.
    assert _translate(SQL, True, 0, True) == \
        "SELECT id FROM t WHERE a = %s AND id = ANY(%s::integer[]) AND b LIKE '%%x'"
    assert _translate(SQL, True, 0, False) == \
        "SELECT id FROM t WHERE a = %s AND id = ANY(%s) AND b LIKE '%%x'"
