"""Consumers and the projects, users and consumer types they belong to."""
from __future__ import annotations

import sqlalchemy as sa

from berth.store.schema import consumer_types, consumers, projects, users
from berth.store.util import utcnow

CONSUMER_COLUMNS = (
    consumers.c.id, consumers.c.uuid, consumers.c.generation, consumers.c.created_at,
    consumers.c.updated_at, consumers.c.project_id.label("project_pk"), consumers.c.user_id.label("user_pk"),
    consumers.c.consumer_type_id,
    projects.c.external_id.label("project_id"), users.c.external_id.label("user_id"),
    consumer_types.c.name.label("consumer_type"),
)


_BY_UUID = (
    sa.select(*CONSUMER_COLUMNS)
    .select_from(consumers.join(projects, projects.c.id == consumers.c.project_id)
                 .join(users, users.c.id == consumers.c.user_id)
                 .outerjoin(consumer_types, consumer_types.c.id == consumers.c.consumer_type_id))
    .where(consumers.c.uuid == sa.bindparam("b_uuid"))
)
_ID_BY_NAME = {
    table.name: sa.select(table.c.id).where(column == sa.bindparam("b_value"))
    for table, column in ((projects, projects.c.external_id), (users, users.c.external_id),
                          (consumer_types, consumer_types.c.name))
}


def get_consumer(conn, uuid):
    return conn.execute(_BY_UUID, {"b_uuid": uuid}).mappings().first()


def _ensure_named(conn, table, column, value) -> int:
    found = conn.execute(_ID_BY_NAME[table.name], {"b_value": value}).scalar()
    if found is not None:
        return found
    now = utcnow()
    try:
        with conn.begin_nested():
            return conn.execute(
                table.insert().values({column.key: value, "created_at": now, "updated_at": now})
            ).inserted_primary_key[0]
    except sa.exc.IntegrityError:
        # Another transaction created it meanwhile; its row is committed, so read it.
        return conn.execute(sa.select(table.c.id).where(column == value)).scalar_one()


def project_pk(conn, external_id) -> int:
    return _ensure_named(conn, projects, projects.c.external_id, external_id)


def user_pk(conn, external_id) -> int:
    return _ensure_named(conn, users, users.c.external_id, external_id)


def consumer_type_pk(conn, name) -> int:
    return _ensure_named(conn, consumer_types, consumer_types.c.name, name)


def lookup_project_pk(conn, external_id):
    return conn.execute(sa.select(projects.c.id).where(projects.c.external_id == external_id)).scalar()


def lookup_user_pk(conn, external_id):
    return conn.execute(sa.select(users.c.id).where(users.c.external_id == external_id)).scalar()
