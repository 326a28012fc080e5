"""Aggregates a provider belongs to."""
from __future__ import annotations

import sqlalchemy as sa

from berth.store.schema import placement_aggregates as aggs, resource_provider_aggregates as rpa
from berth.store.util import utcnow


def provider_aggregates(conn, provider_id) -> list[str]:
    # In the order the aggregates were first seen, so a PUT's answer lists them as they were sent.
    return conn.execute(
        sa.select(aggs.c.uuid).join(rpa, rpa.c.aggregate_id == aggs.c.id)
        .where(rpa.c.resource_provider_id == provider_id).order_by(aggs.c.id)
    ).scalars().all()


def _aggregate_ids(conn, uuids) -> dict[str, int]:
    uuids = list(dict.fromkeys(uuids))
    found = dict(conn.execute(sa.select(aggs.c.uuid, aggs.c.id).where(aggs.c.uuid.in_(uuids))).all())
    now = utcnow()
    for uuid in uuids:
        if uuid not in found:
            try:
                with conn.begin_nested():
                    found[uuid] = conn.execute(
                        aggs.insert().values(uuid=uuid, created_at=now, updated_at=now)
                    ).inserted_primary_key[0]
            except sa.exc.IntegrityError:
                found[uuid] = conn.execute(sa.select(aggs.c.id).where(aggs.c.uuid == uuid)).scalar_one()
    return found


def set_provider_aggregates(conn, provider_id, uuids) -> None:
    wanted = _aggregate_ids(conn, uuids)
    current = dict(conn.execute(
        sa.select(aggs.c.uuid, aggs.c.id).join(rpa, rpa.c.aggregate_id == aggs.c.id)
        .where(rpa.c.resource_provider_id == provider_id)
    ).all())
    stale = [agg_id for uuid, agg_id in current.items() if uuid not in wanted]
    if stale:
        conn.execute(rpa.delete().where(rpa.c.resource_provider_id == provider_id,
                                        rpa.c.aggregate_id.in_(stale)))
    now = utcnow()
    new = [{"resource_provider_id": provider_id, "aggregate_id": agg_id, "created_at": now, "updated_at": now}
           for uuid, agg_id in wanted.items() if uuid not in current]
    if new:
        conn.execute(rpa.insert(), new)
