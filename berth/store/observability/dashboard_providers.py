"""The dashboard's page of provider trees: the trees whose members match a search, and are fuller
than a given share, a page at a time, by name or fullest first, each with its inventories and their
use (one statement for the page and the count)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection

from berth.domain.capacity import capacity
from berth.store.observability.tree_fill import tree_fills
from berth.store.schema import inventories, resource_classes, resource_providers


@dataclass
class InventoryUse:
    resource_class: str
    total: int
    reserved: int
    allocation_ratio: float
    used: int

    @property
    def capacity(self) -> int:
        return capacity(self.total, self.reserved, self.allocation_ratio)


@dataclass
class ProviderNode:
    uuid: str
    name: str
    parent_uuid: str | None
    inventories: list[InventoryUse] = field(default_factory=list)
    children: list[ProviderNode] = field(default_factory=list)


SORTS = ("name", "usage")
"""How the trees may be ordered: by root name, or fullest first (``tree_fill``), then by name."""


@dataclass
class ProviderPage:
    matched: int
    """How many trees match the search, on every page."""
    trees: list[ProviderNode]


# PostgreSQL types an untyped NULL as text, which coalesce cannot match with a number.
_NO_FILL = sa.cast(sa.null(), sa.Float())


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _matching_roots(search: str | None, above: int | None, sort: str) -> sa.Select[Any]:
    """The roots of the trees to list: all, or those with a member whose name holds ``search`` or
    whose uuid starts with it, and those whose fullest inventory is above ``above`` percent; with
    their fill when the trees are sorted or filtered by it."""
    rp = resource_providers
    if above is None and sort == "name":
        roots = sa.select(rp.c.id, rp.c.name, _NO_FILL.label("fill"), _NO_FILL.label("mean_fill"))
    else:
        fills = tree_fills()
        roots = sa.select(rp.c.id, rp.c.name, fills.c.fill, fills.c.mean_fill).outerjoin(
            fills, fills.c.root_id == rp.c.id
        )
        if above is not None:
            roots = roots.where(fills.c.fill * 100 > above)
    roots = roots.where(rp.c.parent_provider_id.is_(None))
    if search:
        member = rp.alias("member")
        pattern = _escaped(search)
        roots = roots.where(
            sa.exists().where(
                member.c.root_provider_id == rp.c.id,
                sa.or_(
                    member.c.name.ilike(f"%{pattern}%", escape="\\"),
                    member.c.uuid.like(f"{pattern.lower()}%", escape="\\"),
                ),
            )
        )
    return roots


def provider_page(
    conn: Connection,
    page: int,
    page_size: int,
    search: str | None = None,
    *,
    above: int | None = None,
    sort: str = "name",
) -> ProviderPage:
    """Page ``page`` (from 1) of the provider trees, by root name or fullest first (``sort``), only
    those fuller than ``above`` percent when it is given, each with every member's inventories and
    usage, read in one statement."""
    rp, inv, rc = resource_providers, inventories, resource_classes
    matching = _matching_roots(search, above, sort).subquery("matching")
    counted = sa.select(sa.func.count().label("matched")).select_from(matching).subquery("counted")
    by_name = [matching.c.name, matching.c.id]
    # Trees without inventory have no fill and come last.
    by_usage = [
        sa.func.coalesce(matching.c.fill, -1.0).desc(),
        sa.func.coalesce(matching.c.mean_fill, -1.0).desc(),
        *by_name,
    ]
    page_roots = (
        sa.select(
            matching.c.id,
            matching.c.name,
            sa.func.coalesce(matching.c.fill, -1.0).label("fill"),
            sa.func.coalesce(matching.c.mean_fill, -1.0).label("mean_fill"),
        )
        .order_by(*(by_usage if sort == "usage" else by_name))
        .limit(page_size)
        .offset((page - 1) * page_size)
        .subquery("page_roots")
    )
    parent = rp.alias("parent")
    members = (
        sa.select(
            page_roots.c.name.label("root_name"),
            page_roots.c.id.label("root_id"),
            page_roots.c.fill.label("root_fill"),
            page_roots.c.mean_fill.label("root_mean_fill"),
            rp.c.id.label("member_id"),
            rp.c.uuid,
            rp.c.name,
            parent.c.uuid.label("parent_uuid"),
            rc.c.name.label("resource_class"),
            inv.c.resource_class_id,
            inv.c.total,
            inv.c.reserved,
            inv.c.allocation_ratio,
            inv.c.used,
        )
        .join_from(page_roots, rp, rp.c.root_provider_id == page_roots.c.id)
        .outerjoin(parent, parent.c.id == rp.c.parent_provider_id)
        .outerjoin(inv, inv.c.resource_provider_id == rp.c.id)
        .outerjoin(rc, rc.c.id == inv.c.resource_class_id)
        .subquery("members")
    )
    # The count rides along with the page's rows, and alone when the page is past the end.
    in_page_order: list[sa.ColumnElement[Any]] = [members.c.root_name, members.c.root_id]
    if sort == "usage":
        in_page_order = [members.c.root_fill.desc(), members.c.root_mean_fill.desc(), *in_page_order]
    statement = (
        sa.select(counted.c.matched, *[c for c in members.c])
        .select_from(counted.outerjoin(members, sa.true()))
        .order_by(*in_page_order, members.c.member_id, members.c.resource_class_id)
    )
    matched = 0
    nodes: dict[str, ProviderNode] = {}
    for row in conn.execute(statement).mappings():
        matched = row["matched"]
        if row["uuid"] is None:
            continue
        node = nodes.get(row["uuid"])
        if node is None:
            node = nodes[row["uuid"]] = ProviderNode(row["uuid"], row["name"], row["parent_uuid"])
        if row["resource_class"] is not None:
            node.inventories.append(
                InventoryUse(row["resource_class"], row["total"], row["reserved"], row["allocation_ratio"], row["used"])
            )
    trees: list[ProviderNode] = []
    # Every member of a listed tree is read, so each parent is found; roots keep the page's order.
    for node in nodes.values():
        parent_node = nodes.get(node.parent_uuid) if node.parent_uuid else None
        (parent_node.children if parent_node else trees).append(node)
    return ProviderPage(matched, trees)
