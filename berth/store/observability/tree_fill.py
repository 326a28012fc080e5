"""How full each provider tree is, for ranking hosts and for sorting and filtering the trees.

A tree's fill is that of its fullest inventory, on any of its members (the root or a child): used
over what may be allocated, before rounding (the domain rule, ``berth.store.capacity_sql``), so above
1 exactly when the inventory is over capacity (an inventory shrunk below what it had given). Trees
equally full are told apart by their mean fill over all their inventories: a host whose GPU child
and CPUs are both full is hotter than one whose GPU child alone is. Inventories that may allocate
nothing (``total == reserved``) have no fill.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from berth.store.capacity_sql import allocatable
from berth.store.schema import inventories, resource_providers

ROOM = allocatable(inventories)
FILL = sa.cast(inventories.c.used, sa.Float()) / sa.func.nullif(ROOM, 0)


def inventory_fills() -> sa.Select[Any]:
    """Every inventory that may allocate something, with its tree's root and its fill."""
    inv, rp = inventories, resource_providers
    return (
        sa.select(
            rp.c.root_provider_id.label("root_id"),
            inv.c.resource_provider_id,
            inv.c.resource_class_id,
            inv.c.total,
            inv.c.reserved,
            inv.c.allocation_ratio,
            inv.c.used,
            FILL.label("fill"),
        )
        .join_from(inv, rp, rp.c.id == inv.c.resource_provider_id)
        .where(ROOM > 0)
    )


def tree_fills() -> sa.Subquery:
    """One row per tree with an inventory: ``root_id``, ``fill`` (its fullest) and ``mean_fill``."""
    each = inventory_fills().subquery("inventory_fill")
    return (
        sa.select(
            each.c.root_id,
            sa.func.max(each.c.fill).label("fill"),
            sa.func.avg(each.c.fill).label("mean_fill"),
        )
        .group_by(each.c.root_id)
        .subquery("tree_fill")
    )
