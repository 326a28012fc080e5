"""Plain SQL on the transaction's own DBAPI connection, for the hottest paths.

Building and caching a SQLAlchemy statement costs a few hundred microseconds of Python per query,
which dominates a candidate search that runs a handful of small queries over a few hundred rows.
These helpers send fixed SQL text straight to the driver instead, inside the same transaction.
SQL is written once with ``?`` placeholders and an ``{ids}`` marker for a list of values; it is
translated for psycopg (``%s``, ``= ANY(%s)``) on first use.
"""
from __future__ import annotations

from functools import lru_cache


def _is_postgres(conn) -> bool:
    return conn.dialect.name == "postgresql"


@lru_cache(maxsize=256)
def _translate(sql: str, postgres: bool, id_count: int) -> str:
    if postgres:
        sql = sql.replace("%", "%%").replace("?", "%s")
        return sql.replace("IN {ids}", "= ANY(%s)")
    return sql.replace("{ids}", "(" + ",".join("?" * id_count) + ")" if id_count else "(NULL)")


def _cursor(conn, sql, params, ids):
    postgres = _is_postgres(conn)
    params = list(params)
    if ids is not None:
        ids = list(ids)
        if postgres:
            params.append(ids)
        else:
            params.extend(ids)
    text = _translate(sql, postgres, 0 if ids is None or postgres else len(ids))
    cursor = conn.connection.dbapi_connection.cursor()
    try:
        cursor.execute(text, params)
    except BaseException:
        cursor.close()
        raise
    return cursor


def fetch(conn, sql: str, params=(), ids=None) -> list[tuple]:
    """Rows of ``sql``; ``ids`` fills its ``IN {ids}`` list (after the other parameters)."""
    cursor = _cursor(conn, sql, params, ids)
    try:
        return cursor.fetchall()
    finally:
        cursor.close()


def execute(conn, sql: str, params=(), ids=None) -> int:
    """Run a statement that changes rows; the number of rows it changed."""
    cursor = _cursor(conn, sql, params, ids)
    try:
        return cursor.rowcount
    finally:
        cursor.close()
