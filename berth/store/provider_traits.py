"""Traits a provider has."""
from __future__ import annotations

import sqlalchemy as sa

from berth.store.schema import resource_provider_traits as rpt, traits
from berth.store.util import utcnow


_NAMES = (
    sa.select(traits.c.name).join(rpt, rpt.c.trait_id == traits.c.id)
    .where(rpt.c.resource_provider_id == sa.bindparam("b_provider")).order_by(traits.c.name)
)
_IDS = sa.select(rpt.c.trait_id).where(rpt.c.resource_provider_id == sa.bindparam("b_provider"))
_INSERT = rpt.insert()


def provider_traits(conn, provider_id) -> list[str]:
    return conn.execute(_NAMES, {"b_provider": provider_id}).scalars().all()


def set_provider_traits(conn, provider_id, trait_ids: dict[str, int]) -> None:
    current = set(conn.execute(_IDS, {"b_provider": provider_id}).scalars())
    wanted = set(trait_ids.values())
    if current - wanted:
        conn.execute(rpt.delete().where(rpt.c.resource_provider_id == provider_id,
                                        rpt.c.trait_id.in_(current - wanted)))
    now = utcnow()
    if wanted - current:
        conn.execute(_INSERT, [
            {"resource_provider_id": provider_id, "trait_id": t, "created_at": now, "updated_at": now}
            for t in sorted(wanted - current)
        ])
