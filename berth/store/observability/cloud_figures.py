"""The cloud's figures as a scrape reads them: capacity and usage per resource class, and counts.

One statement answers everything: the counts come as columns of a one-row table, joined to the
inventories grouped by class and by the fields capacity is made of.  Clouds are built of few kinds of
hosts, so those groups are few, and the capacity of each is the domain's rule applied in Python
(``berth.domain.capacity.capacity``), rounded per inventory as the allocation writes round it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import sqlalchemy as sa
from sqlalchemy import Connection

from berth.domain.capacity import capacity
from berth.store.schema import allocation_leases, consumers, inventories, resource_classes, resource_providers


@dataclass(frozen=True)
class ClassFigures:
    """One resource class over every provider: what may be allocated, and what is."""

    capacity: int
    used: int

    @property
    def free(self) -> int:
        """Capacity left; below zero only where inventories shrank below what they had given."""
        return self.capacity - self.used


@dataclass(frozen=True)
class CloudFigures:
    providers: int
    consumers: int
    leases_outstanding: int
    by_class: dict[str, ClassFigures] = field(default_factory=dict)


def _count(table: sa.Table) -> sa.ScalarSelect[int]:
    return sa.select(sa.func.count()).select_from(table).scalar_subquery()


_COUNTS: Final = sa.select(
    _count(resource_providers).label("providers"),
    _count(consumers).label("consumers"),
    _count(allocation_leases).label("leases"),
).subquery("counts")

_SHAPES: Final = (
    sa.select(
        resource_classes.c.name,
        inventories.c.total,
        inventories.c.reserved,
        inventories.c.allocation_ratio,
        sa.func.count().label("inventories"),
        sa.func.sum(inventories.c.used).label("used"),
    )
    .join(resource_classes, resource_classes.c.id == inventories.c.resource_class_id)
    .group_by(resource_classes.c.name, inventories.c.total, inventories.c.reserved, inventories.c.allocation_ratio)
    .subquery("shapes")
)

_FIGURES: Final = sa.select(
    _COUNTS.c.providers,
    _COUNTS.c.consumers,
    _COUNTS.c.leases,
    _SHAPES.c.name,
    _SHAPES.c.total,
    _SHAPES.c.reserved,
    _SHAPES.c.allocation_ratio,
    _SHAPES.c.inventories,
    _SHAPES.c.used,
).select_from(_COUNTS.outerjoin(_SHAPES, sa.true()))


def cloud_figures(conn: Connection) -> CloudFigures:
    rows = conn.execute(_FIGURES).all()
    capacities: dict[str, int] = {}
    used: dict[str, int] = {}
    for row in rows:
        if row.name is None:  # no inventory at all: the counts' row alone
            continue
        capacities[row.name] = capacities.get(row.name, 0) + row.inventories * capacity(
            row.total, row.reserved, row.allocation_ratio
        )
        used[row.name] = used.get(row.name, 0) + int(row.used)
    first = rows[0]
    return CloudFigures(
        providers=first.providers,
        consumers=first.consumers,
        leases_outstanding=first.leases,
        by_class={name: ClassFigures(capacities[name], used[name]) for name in sorted(capacities)},
    )
