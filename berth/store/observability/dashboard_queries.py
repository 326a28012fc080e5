"""The dashboard's figures: the cloud's totals and its rankings (the page of provider trees is
``berth.store.observability.dashboard_providers``).

All are polled every few seconds by every open dashboard, each in one statement. The totals are
cheap at any size: they sum the inventories' maintained ``used`` counters, so the page shows the
cloud's capacity first. The rankings of consumers and projects group the allocations once per
(consumer, class), which is what costs at 10,000 hosts, so the page asks for them separately, after
the totals. The summary is both at once, for API callers.

Capacity follows the domain rule (``berth.domain.capacity``), applied in Python: the statements group
inventories by their (class, total, reserved, ratio) shape, of which a cloud has few, so the rounding
of each inventory's capacity stays the domain's. SQL ranks by the unrounded figure, which orders the
same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection

from berth.domain.capacity import capacity
from berth.store.capacity_sql import allocatable
from berth.store.observability import tree_fill
from berth.store.schema import (
    allocations,
    consumers,
    inventories,
    projects,
    resource_classes,
    resource_providers,
)

TOP = 10
"""How many providers, consumers and projects each ranking of the summary holds."""

_ROOM = allocatable(inventories)


@dataclass
class ClassTotals:
    resource_class: str
    capacity: int = 0
    used: int = 0
    inventories: int = 0

    @property
    def free(self) -> int:
        return max(self.capacity - self.used, 0)


@dataclass
class Ranked:
    """One entry of a ranking: who, by which class it ranks there, and how much of it.

    A host (a tree, named by its root) ranks by its fullest inventory, which ``member_ident`` and
    ``member_label`` name (the root itself or a child), and ``mean_share`` breaks ties. Consumers
    alike (same project, class and amount) make one entry of ``owners`` consumers, ``ident`` the
    first of them.
    """

    ident: str
    label: str | None
    resource_class: str
    used: int
    capacity: int
    member_ident: str | None = None
    member_label: str | None = None
    mean_share: float = 0.0
    owners: int = 1

    @property
    def share(self) -> float:
        return self.used / self.capacity if self.capacity > 0 else 0.0


@dataclass
class Summary:
    classes: dict[str, ClassTotals] = field(default_factory=dict)
    providers: int = 0
    roots: int = 0
    consumers: int = 0
    over_capacity: int = 0
    """Providers with an inventory of which more is used than it may allocate (shrunk below its use)."""
    fullest_providers: list[Ranked] = field(default_factory=list)
    biggest_consumers: list[Ranked] = field(default_factory=list)
    biggest_projects: list[Ranked] = field(default_factory=list)


def _typed_null(type_: Any) -> sa.Cast[Any]:
    # PostgreSQL types an untyped NULL of a UNION branch as text, which clashes with the numbers.
    return sa.cast(sa.null(), type_)


def _section(kind: str, *, ident: Any = None, label: Any = None, **figures: Any) -> list[Any]:
    """The summary statement's columns for one section: what each row is, then its figures."""
    text = sa.String()
    columns = [
        sa.literal(kind, text).label("kind"),
        (ident if ident is not None else _typed_null(text)).label("ident"),
        (label if label is not None else _typed_null(text)).label("label"),
    ]
    for name, type_ in (
        ("member_ident", text),
        ("member_label", text),
        ("resource_class", text),
        ("total", sa.BigInteger()),
        ("reserved", sa.BigInteger()),
        ("allocation_ratio", sa.Float()),
        ("used", sa.BigInteger()),
        ("mean_share", sa.Float()),
        ("count", sa.BigInteger()),
    ):
        value = figures.get(name)
        column: sa.ColumnElement[Any] = sa.cast(value, type_) if value is not None else _typed_null(type_)
        columns.append(column.label(name))
    return columns


def _shapes() -> sa.Select[Any]:
    inv, rc = inventories, resource_classes
    return (
        sa.select(
            *_section(
                "shape",
                resource_class=rc.c.name,
                total=inv.c.total,
                reserved=inv.c.reserved,
                allocation_ratio=inv.c.allocation_ratio,
                used=sa.func.sum(inv.c.used),
                count=sa.func.count(),
            )
        )
        .join_from(inv, rc, rc.c.id == inv.c.resource_class_id)
        .group_by(rc.c.name, inv.c.total, inv.c.reserved, inv.c.allocation_ratio)
    )


def _fullest_hosts() -> sa.Select[Any]:
    """The fullest trees, one row each: the root, and the member and inventory that make it full.

    A tree ranks by its fullest inventory on any member (``tree_fill``), so that a host shows once,
    with its fullest child within it, rather than the children crowding the hosts out.
    """
    rc, rp = resource_classes, resource_providers
    each = tree_fill.inventory_fills().subquery("inventory_fill")
    ranked = (
        sa.select(
            each,
            sa.func.avg(each.c.fill).over(partition_by=each.c.root_id).label("mean_fill"),
            sa.func.row_number()
            .over(
                partition_by=each.c.root_id,
                order_by=(each.c.fill.desc(), each.c.resource_class_id, each.c.resource_provider_id),
            )
            .label("rank"),
        )
    ).subquery("tree_rank")
    root, member = rp.alias("root"), rp.alias("member")
    top = (
        sa.select(
            *_section(
                "provider",
                ident=root.c.uuid,
                label=root.c.name,
                member_ident=member.c.uuid,
                member_label=member.c.name,
                resource_class=rc.c.name,
                total=ranked.c.total,
                reserved=ranked.c.reserved,
                allocation_ratio=ranked.c.allocation_ratio,
                used=ranked.c.used,
                mean_share=ranked.c.mean_fill,
            )
        )
        .join_from(ranked, root, root.c.id == ranked.c.root_id)
        .join(member, member.c.id == ranked.c.resource_provider_id)
        .join(rc, rc.c.id == ranked.c.resource_class_id)
        .where(ranked.c.rank == 1)
        .order_by(ranked.c.fill.desc(), ranked.c.mean_fill.desc(), root.c.name)
        .limit(TOP)
        .subquery("fullest")
    )
    return sa.select(*top.c)


def _class_room() -> sa.CTE:
    return (
        sa.select(inventories.c.resource_class_id, sa.func.sum(_ROOM).label("room"))
        .group_by(inventories.c.resource_class_id)
        .cte("class_room")
    )


def _biggest(kind: str, class_room: sa.CTE) -> sa.Select[Any]:
    """The consumers or projects holding the largest share of any one class of the cloud.

    Each is ranked by its dominant share: the class of which it holds the most, relative to the
    cloud's capacity of that class, so that a consumer of many VCPUs and one of much memory compare.
    Allocations are grouped by the narrowest key (the consumer's uuid, the project's row id), and
    names are joined to the few ranked rows only: the grouping is the statement's main cost.
    """
    by_project = kind == "project"
    owner = consumers.c.project_id if by_project else allocations.c.consumer_id
    used = sa.func.sum(allocations.c.used)
    share = sa.cast(used, sa.Float) / sa.func.nullif(class_room.c.room, 0)
    grouped = sa.select(
        owner.label("owner"),
        allocations.c.resource_class_id,
        used.label("owner_used"),
        share.label("share"),
        sa.func.row_number()
        .over(partition_by=owner, order_by=(share.desc(), allocations.c.resource_class_id))
        .label("rank"),
    )
    if by_project:
        grouped = grouped.join_from(allocations, consumers, consumers.c.uuid == allocations.c.consumer_id)
    per_class = (
        grouped.join(class_room, class_room.c.resource_class_id == allocations.c.resource_class_id)
        .group_by(owner, allocations.c.resource_class_id, class_room.c.room)
        .subquery(f"{kind}_share")
    )
    if by_project:
        ranked = (
            sa.select(per_class)
            .where(per_class.c.rank == 1)
            .order_by(per_class.c.share.desc(), per_class.c.owner)
            .limit(TOP)
            .subquery(f"ranked_{kind}")
        )
        named = sa.select(
            *_section(
                kind,
                ident=projects.c.external_id,
                resource_class=resource_classes.c.name,
                used=ranked.c.owner_used,
            )
        ).join_from(ranked, projects, projects.c.id == ranked.c.owner)
    else:
        # Consumers alike (one flavor of one project) are one entry: a cloud has many of each, and
        # ten rows of the same figures would rank nothing. An entry is named by its first consumer's
        # uuid, labelled with its project, and counts its consumers.
        leaders = sa.select(per_class).where(per_class.c.rank == 1).subquery(f"leading_{kind}")
        owners = sa.func.count().label("owners")
        ranked = (
            sa.select(
                sa.func.min(leaders.c.owner).label("owner"),
                consumers.c.project_id,
                leaders.c.resource_class_id,
                leaders.c.owner_used,
                leaders.c.share,
                owners,
            )
            .join_from(leaders, consumers, consumers.c.uuid == leaders.c.owner)
            .group_by(consumers.c.project_id, leaders.c.resource_class_id, leaders.c.owner_used, leaders.c.share)
            .order_by(leaders.c.share.desc(), owners.desc(), sa.func.min(leaders.c.owner))
            .limit(TOP)
            .subquery(f"ranked_{kind}")
        )
        named = sa.select(
            *_section(
                kind,
                ident=ranked.c.owner,
                label=projects.c.external_id,
                resource_class=resource_classes.c.name,
                used=ranked.c.owner_used,
                count=ranked.c.owners,
            )
        ).join_from(ranked, projects, projects.c.id == ranked.c.project_id)
    return named.join(resource_classes, resource_classes.c.id == ranked.c.resource_class_id)


def _counts() -> list[sa.Select[Any]]:
    rp = resource_providers
    return [
        sa.select(*_section("providers", count=sa.func.count())).select_from(rp),
        sa.select(*_section("roots", count=sa.func.count())).where(rp.c.parent_provider_id.is_(None)),
        sa.select(*_section("consumers", count=sa.func.count())).select_from(consumers),
        sa.select(
            *_section("over_capacity", count=sa.func.count(sa.distinct(inventories.c.resource_provider_id)))
        ).where(inventories.c.used > _ROOM),
    ]


def _statements() -> dict[str, sa.CompoundSelect[Any]]:
    class_room = _class_room()
    rankings = [_fullest_hosts(), _biggest("consumer", class_room), _biggest("project", class_room)]
    # The rankings carry the shapes too: an owner's share is of the cloud's capacity of its class.
    return {
        "totals": sa.union_all(_shapes(), *_counts()),
        "rankings": sa.union_all(_shapes(), *rankings),
        "summary": sa.union_all(_shapes(), *rankings, *_counts()),
    }


STATEMENTS = _statements()
TOTALS, RANKINGS, SUMMARY = STATEMENTS["totals"], STATEMENTS["rankings"], STATEMENTS["summary"]


def _read(conn: Connection, statement: sa.CompoundSelect[Any]) -> Summary:
    """What ``statement`` (one of the above) holds; the sections it does not read stay empty."""
    result = Summary()
    rankings = {
        "provider": result.fullest_providers,
        "consumer": result.biggest_consumers,
        "project": result.biggest_projects,
    }
    owned: list[tuple[list[Ranked], Any]] = []
    for row in conn.execute(statement).mappings():
        kind = row["kind"]
        if kind == "shape":
            totals = result.classes.setdefault(row["resource_class"], ClassTotals(row["resource_class"]))
            totals.capacity += capacity(row["total"], row["reserved"], row["allocation_ratio"]) * row["count"]
            totals.used += row["used"]
            totals.inventories += row["count"]
        elif kind == "provider":
            room = capacity(row["total"], row["reserved"], row["allocation_ratio"])
            rankings[kind].append(
                Ranked(
                    row["ident"],
                    row["label"],
                    row["resource_class"],
                    row["used"],
                    room,
                    member_ident=row["member_ident"],
                    member_label=row["member_label"],
                    mean_share=row["mean_share"] or 0.0,
                )
            )
        elif kind in rankings:
            owned.append((rankings[kind], row))
        else:
            setattr(result, kind, row["count"])
    # An owner's share is of the cloud's capacity of its class, known once every shape is read.
    for ranking, row in owned:
        cloud = result.classes.get(row["resource_class"])
        ranking.append(
            Ranked(
                row["ident"],
                row["label"],
                row["resource_class"],
                row["used"],
                cloud.capacity if cloud else 0,
                owners=row["count"] or 1,
            )
        )
    result.fullest_providers.sort(key=lambda r: (-r.share, -r.mean_share, r.label or ""))
    for ranking in (result.biggest_consumers, result.biggest_projects):
        ranking.sort(key=lambda r: (-r.share, -r.owners, r.ident))
    return result


def summary(conn: Connection) -> Summary:
    """The cloud's totals, counts and rankings, read in one statement."""
    return _read(conn, SUMMARY)


def totals(conn: Connection) -> Summary:
    """The cloud's totals per class and its counts, without the rankings: cheap at any size."""
    return _read(conn, TOTALS)


def rankings(conn: Connection) -> Summary:
    """The three rankings (and the totals per class they are shares of), without the counts."""
    return _read(conn, RANKINGS)
