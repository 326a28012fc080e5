"""Consumers and the projects, users and consumer types they belong to."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy import Column, Connection, Table

from berth.store.rawsql import fetch_records, fetch_value
from berth.store.schema import consumer_types, projects, users
from berth.store.util import utcnow

_BY_UUID = """
SELECT c.id, c.uuid, c.generation, c.created_at, c.updated_at, c.project_id AS project_pk,
       c.user_id AS user_pk, c.consumer_type_id, p.external_id AS project_id, u.external_id AS user_id,
       ct.name AS consumer_type
FROM consumers c
JOIN projects p ON p.id = c.project_id
JOIN users u ON u.id = c.user_id
LEFT JOIN consumer_types ct ON ct.id = c.consumer_type_id
WHERE c.uuid = ?"""
_ID_BY_NAME = {
    "projects": "SELECT id FROM projects WHERE external_id = ?",
    "users": "SELECT id FROM users WHERE external_id = ?",
    "consumer_types": "SELECT id FROM consumer_types WHERE name = ?",
}


def get_consumer(conn: Connection, uuid: str) -> dict[str, Any] | None:
    """The consumer with its owner's external ids and its type's name, or None."""
    rows = fetch_records(conn, _BY_UUID, (uuid,))
    return rows[0] if rows else None


def _ensure_named(conn: Connection, table: Table, column: Column[str], value: str) -> int:
    found: int | None = fetch_value(conn, _ID_BY_NAME[table.name], (value,))
    if found is not None:
        return found
    now = utcnow()
    try:
        with conn.begin_nested():
            key = conn.execute(
                table.insert().values({column.key: value, "created_at": now, "updated_at": now})
            ).inserted_primary_key
            assert key is not None  # an INSERT of one row
            created: int = key[0]
            return created
    except sa.exc.IntegrityError:
        # Another transaction created it meanwhile; its row is committed, so read it.
        existing: int = conn.execute(sa.select(table.c.id).where(column == value)).scalar_one()
        return existing


def project_pk(conn: Connection, external_id: str) -> int:
    return _ensure_named(conn, projects, projects.c.external_id, external_id)


def user_pk(conn: Connection, external_id: str) -> int:
    return _ensure_named(conn, users, users.c.external_id, external_id)


def consumer_type_pk(conn: Connection, name: str) -> int:
    return _ensure_named(conn, consumer_types, consumer_types.c.name, name)


def lookup_project_pk(conn: Connection, external_id: str) -> int | None:
    return conn.execute(sa.select(projects.c.id).where(projects.c.external_id == external_id)).scalar()


def lookup_user_pk(conn: Connection, external_id: str) -> int | None:
    return conn.execute(sa.select(users.c.id).where(users.c.external_id == external_id)).scalar()
