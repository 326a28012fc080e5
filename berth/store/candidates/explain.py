"""Why an allocation candidate request found few or no answers.

For each request group the conditions are applied one after another to every provider, and the
answer says how many providers each condition removed from those still in the running.  The
unsuffixed group may combine several providers of a tree, so its counts tell which single
conditions are scarce rather than which trees fail.

The conditions that say where to look (the tree, aggregates, traits) come before those that say
what must be found there (inventory, free capacity, units). The step that leaves nothing is the one
a reader takes for the cause, and in the other order a tree or aggregate whose providers are full
was blamed on the tree or aggregate: the providers with room elsewhere went on to be removed by
"is in the tree", though the tree's own provider had been removed earlier, for want of room.
Each condition also says how many providers meet it ``alone``, whatever the others: when that is
not 0 where the funnel ends, no single condition is the cause, only that one together with those
before it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import NotRequired, TypeAlias, TypedDict

import sqlalchemy as sa
from sqlalchemy import ColumnElement, Connection

from berth.domain.candidate_request import CandidateRequest, RequestGroup
from berth.store import capacity_sql
from berth.store.schema import (
    inventories as inv,
)
from berth.store.schema import (
    resource_provider_aggregates as rpa,
)
from berth.store.schema import (
    resource_provider_traits as rpt,
)
from berth.store.schema import (
    resource_providers as rp,
)

# One condition of the funnel: its kind, what it says, and the clause over ``resource_providers``.
Step: TypeAlias = tuple[str, str, ColumnElement[bool]]


class Condition(TypedDict):
    kind: str
    condition: str
    # Removed by this condition from those the conditions before it left, and how many it leaves.
    excluded: int
    remaining: int
    # Providers that meet this condition by itself, of all of them.
    alone: int


class GroupReport(TypedDict):
    suffix: str
    conditions: list[Condition]


class Report(TypedDict):
    providers: int
    groups: list[GroupReport]
    root: list[Condition]
    # Added by the caller, which runs the search itself.
    candidates: NotRequired[int]
    candidates_capped_at: NotRequired[int]


def _has_inventory(rc: int) -> ColumnElement[bool]:
    return sa.exists().where(inv.c.resource_provider_id == rp.c.id, inv.c.resource_class_id == rc)


def _has_capacity(rc: int, amount: int) -> ColumnElement[bool]:
    return sa.exists().where(
        inv.c.resource_provider_id == rp.c.id,
        inv.c.resource_class_id == rc,
        capacity_sql.has_room(amount),
    )


def _fits_units(rc: int, amount: int) -> ColumnElement[bool]:
    return sa.exists().where(
        inv.c.resource_provider_id == rp.c.id,
        inv.c.resource_class_id == rc,
        capacity_sql.fits_units(amount),
    )


def _has_trait(provider_col: ColumnElement[int], trait_ids: Collection[int]) -> ColumnElement[bool]:
    return sa.exists().where(rpt.c.resource_provider_id == provider_col, rpt.c.trait_id.in_(trait_ids))


def _own_in_aggregates(provider_col: ColumnElement[int], agg_ids: Collection[int]) -> ColumnElement[bool]:
    return sa.exists().where(rpa.c.resource_provider_id == provider_col, rpa.c.aggregate_id.in_(agg_ids))


def _in_every(provider_col: ColumnElement[int], member_of: Sequence[Collection[int]]) -> ColumnElement[bool]:
    return sa.and_(*(_own_in_aggregates(provider_col, any_of) if any_of else sa.false() for any_of in member_of))


def _member_of(group: RequestGroup, member_of: Sequence[Collection[int]]) -> ColumnElement[bool]:
    """In every any-of set of ``member_of``, as the candidate search counts it: a suffixed group's
    provider by itself; for the unsuffixed group, the provider by itself or its root by itself."""
    if group.suffix:
        return _in_every(rp.c.id, member_of)
    return sa.or_(_in_every(rp.c.id, member_of), _in_every(rp.c.root_provider_id, member_of))


def _in_none(group: RequestGroup, agg_ids: Collection[int]) -> ColumnElement[bool]:
    """In none of ``agg_ids``: a suffixed group's provider; for the unsuffixed group, neither the
    provider nor its root."""
    if group.suffix:
        return ~_own_in_aggregates(rp.c.id, agg_ids)
    return ~sa.or_(_own_in_aggregates(rp.c.id, agg_ids), _own_in_aggregates(rp.c.root_provider_id, agg_ids))


def explain(
    conn: Connection,
    request: CandidateRequest,
    *,
    class_names: Mapping[int, str],
    trait_names: Mapping[int, str],
    aggregate_uuids: Mapping[int, str],
) -> Report:
    total: int = conn.execute(sa.select(sa.func.count()).select_from(rp)).scalar_one()
    groups: list[GroupReport] = []
    for group in request.groups:
        steps = _group_steps(group, trait_names, aggregate_uuids) + _resource_steps(group, class_names)
        groups.append({"suffix": group.suffix, "conditions": _funnel(conn, steps, total)})
    return {"providers": total, "groups": groups, "root": _funnel(conn, _root_steps(request, trait_names), total)}


def _resource_steps(group: RequestGroup, class_names: Mapping[int, str]) -> list[Step]:
    steps: list[Step] = []
    for rc, amount in group.resources.items():
        name = class_names[rc]
        steps += [
            ("inventory", f"has {name} inventory", _has_inventory(rc)),
            ("capacity", f"has {amount} {name} free", _has_capacity(rc, amount)),
            (
                "units",
                f"allows {amount} {name} in one allocation (min_unit, max_unit, step_size)",
                _fits_units(rc, amount),
            ),
        ]
    return steps


def _group_steps(group: RequestGroup, trait_names: Mapping[int, str], aggregate_uuids: Mapping[int, str]) -> list[Step]:
    """The group's conditions on its tree, aggregates and traits, the widest first."""
    steps: list[Step] = []
    if group.impossible:
        steps.append(("tree", "is in the tree named by in_tree (no such provider)", sa.false()))
    elif group.in_tree_root is not None:
        steps.append(("tree", "is in the tree named by in_tree", rp.c.root_provider_id == group.in_tree_root))
    # Each step holds every member_of so far: the provider (or its root) must meet them all alone.
    for index, any_of in enumerate(group.member_of):
        uuids = " or ".join(sorted(aggregate_uuids[a] for a in any_of)) or "(unknown aggregates)"
        steps.append(("aggregates", f"is in aggregate {uuids}", _member_of(group, group.member_of[: index + 1])))
    if group.forbidden_aggregates:
        uuids = ", ".join(sorted(aggregate_uuids[a] for a in group.forbidden_aggregates))
        steps.append(("aggregates", f"is in none of aggregates {uuids}", _in_none(group, group.forbidden_aggregates)))
    for any_of in group.required:
        names = " or ".join(sorted(trait_names[t] for t in any_of))
        steps.append(("traits", f"has trait {names}", _has_trait(rp.c.id, any_of)))
    if group.forbidden:
        names = ", ".join(sorted(trait_names[t] for t in group.forbidden))
        steps.append(("traits", f"lacks traits {names}", ~_has_trait(rp.c.id, group.forbidden)))
    return steps


def _root_steps(request: CandidateRequest, trait_names: Mapping[int, str]) -> list[Step]:
    steps: list[Step] = []
    for any_of in request.root_required:
        names = " or ".join(sorted(trait_names[t] for t in any_of))
        steps.append(("root", f"root has trait {names}", _has_trait(rp.c.root_provider_id, any_of)))
    if request.root_forbidden:
        names = ", ".join(sorted(trait_names[t] for t in request.root_forbidden))
        steps.append(("root", f"root lacks traits {names}", ~_has_trait(rp.c.root_provider_id, request.root_forbidden)))
    return steps


def _funnel(conn: Connection, steps: list[Step], total: int) -> list[Condition]:
    """How many providers each step leaves, applied one after another, and how many meet it alone."""
    conditions = []
    remaining = total
    out: list[Condition] = []
    for kind, label, condition in steps:
        conditions.append(condition)
        now, alone = conn.execute(
            sa.select(
                sa.func.count().filter(sa.and_(*conditions)),
                sa.func.count().filter(condition),
            ).select_from(rp)
        ).one()
        out.append({"kind": kind, "condition": label, "excluded": remaining - now, "remaining": now, "alone": alone})
        remaining = now
    return out
