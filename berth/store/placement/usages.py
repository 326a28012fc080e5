"""Usage totals, read from the inventories' maintained ``used`` counters or summed per project."""

from __future__ import annotations

from typing import TypeAlias

import sqlalchemy as sa
from sqlalchemy import Connection

from berth.store.schema import allocations, consumer_types, consumers, inventories, resource_classes

# Resource class name (or "consumer_count") -> total, for each consumer type (or "all").
UsagesByType: TypeAlias = dict[str, dict[str, int]]


def provider_usages(conn: Connection, provider_id: int) -> dict[str, int]:
    rows = conn.execute(
        sa.select(resource_classes.c.name, inventories.c.used)
        .join(resource_classes, resource_classes.c.id == inventories.c.resource_class_id)
        .where(inventories.c.resource_provider_id == provider_id)
        .order_by(resource_classes.c.id)
    )
    return {name: used for name, used in rows}


def project_usages(
    conn: Connection,
    project_pk: int,
    user_pk: int | None = None,
    *,
    by_consumer_type: bool = False,
    consumer_type: str | None = None,
) -> dict[str, int] | UsagesByType:
    """Sum of allocations of a project's (and optionally a user's) consumers per resource class.

    With ``by_consumer_type`` the answer is grouped per consumer type (``unknown`` for none) and
    counts the consumers, as microversion 1.38 reports it.  ``consumer_type`` is a type name,
    ``"all"`` or ``"unknown"``.
    """
    type_name = sa.func.coalesce(consumer_types.c.name, "unknown")
    query = (
        sa.select(
            type_name.label("consumer_type"),
            resource_classes.c.name,
            sa.func.sum(allocations.c.used),
            sa.func.count(sa.distinct(consumers.c.id)),
        )
        .select_from(
            allocations.join(consumers, consumers.c.uuid == allocations.c.consumer_id)
            .join(resource_classes, resource_classes.c.id == allocations.c.resource_class_id)
            .outerjoin(consumer_types, consumer_types.c.id == consumers.c.consumer_type_id)
        )
        .where(consumers.c.project_id == project_pk)
    )
    if user_pk is not None:
        query = query.where(consumers.c.user_id == user_pk)
    if consumer_type == "unknown":
        query = query.where(consumers.c.consumer_type_id.is_(None))
    elif consumer_type not in (None, "all"):
        query = query.where(consumer_types.c.name == consumer_type)
    if not by_consumer_type:
        totals: dict[str, int] = {}
        for _, name, used, _ in conn.execute(query.group_by(type_name, resource_classes.c.name)):
            totals[name] = totals.get(name, 0) + int(used)
        return totals
    grouped: UsagesByType = {}
    for type_, name, used, _ in conn.execute(query.group_by(type_name, resource_classes.c.name)):
        grouped.setdefault(type_, {})[name] = int(used)
    count_query = (
        sa.select(type_name, sa.func.count(sa.distinct(consumers.c.id)))
        .select_from(consumers.outerjoin(consumer_types, consumer_types.c.id == consumers.c.consumer_type_id))
        .where(consumers.c.project_id == project_pk, sa.exists().where(allocations.c.consumer_id == consumers.c.uuid))
        .group_by(type_name)
    )
    if user_pk is not None:
        count_query = count_query.where(consumers.c.user_id == user_pk)
    for type_, count in conn.execute(count_query):
        if type_ in grouped:
            grouped[type_]["consumer_count"] = count
    if consumer_type == "all" and grouped:
        merged = {"consumer_count": 0}
        for usages in grouped.values():
            for key, value in usages.items():
                merged[key] = merged.get(key, 0) + value
        return {"all": merged}
    return grouped
