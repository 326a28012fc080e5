"""The quota check of a claim, made inside the claim's own write transaction, before it writes.

The project's quota row is locked first (``berth.store.quotas.limits.lock_project``): on PostgreSQL
claims of one project then count one after another, each seeing what those before it committed; on
SQLite the write transaction holds every other writer back already. A project without limits costs
that one lookup by primary key and nothing more.

A write is refused (409 ``berth.quota.exceeded``) when, for a resource whose limit it would raise
usage against, the usage after it, ``usage - held + asked``, would pass the limit: ``held`` is what
the written consumers hold in the project (or user) now, which the write replaces. A write that does
not raise a resource's usage is never refused for it, so a project over a lowered limit may still
shrink. A refusal leaves the transaction to be rolled back: nothing of the claim is written.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sqlalchemy import Connection

from berth.domain import error_codes
from berth.domain.candidate_query import CandidateQuery
from berth.domain.errors import Conflict
from berth.store.placement import consumers as consumer_store
from berth.store.placement.allocations import ConsumerAllocations
from berth.store.quotas.limits import CONSUMERS, PROJECT_WIDE, Limits, limits_by_user, lock_project
from berth.store.quotas.usage import Usage, usage_of


@dataclass(frozen=True)
class Ask:
    """What a write gives the consumers it writes of one project (or user): per resource class, and
    how many of them hold allocations after it."""

    resources: Mapping[str, int] = field(default_factory=dict)
    consumers: int = 0


def asked_by_query(query: CandidateQuery) -> dict[str, int]:
    """What any allocation request answering the query allocates, per resource class."""
    asked: dict[str, int] = defaultdict(int)
    for group in query.groups:
        for name, amount in group.resources:
            asked[name] += amount
    return dict(asked)


def check_quota(
    conn: Connection,
    project_id: str,
    user_id: str,
    asked: Mapping[str, int],
    consumers_added: int,
    replacing: Collection[str] = (),
) -> None:
    """Refuse (409) a write giving ``consumers_added`` consumers of the user in the project
    ``asked`` in all, replacing whatever the consumers ``replacing`` hold; lock the project's quota
    until the transaction ends."""
    check_project(conn, project_id, {user_id: Ask(asked, consumers_added)}, replacing)


def check_project(conn: Connection, project_id: str, asks: Mapping[str, Ask], replacing: Collection[str] = ()) -> None:
    """``check_quota`` for a write to consumers of several users of one project (``asks`` by user)."""
    if not lock_project(conn, project_id):
        return
    limits = limits_by_user(conn, project_id)
    _check_scope(conn, project_id, None, limits.get(PROJECT_WIDE, {}), _total(asks.values()), replacing)
    for user_id in sorted(asks):
        _check_scope(conn, project_id, user_id, limits.get(user_id, {}), asks[user_id], replacing)


def check_allocation_write(conn: Connection, requests: Sequence[ConsumerAllocations]) -> None:
    """The check of a Placement allocation write (PUT or POST /allocations): each project whose
    consumers it writes, in order of project (the order of their locks)."""
    asks: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
    consumers: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for request in requests:
        owner = _owner(conn, request)
        if owner is None:
            continue  # a new consumer without a project: the write refuses it (400)
        project_id, user_id = owner
        asked = asks[project_id][user_id]
        for by_class in request.allocations.values():
            for name, amount in by_class.items():
                asked[name] += amount
        if any(request.allocations.values()):
            consumers[project_id][user_id] += 1
    replacing = sorted({request.consumer_uuid for request in requests})
    for project_id in sorted(asks):
        by_user = {user: Ask(dict(asked), consumers[project_id][user]) for user, asked in asks[project_id].items()}
        check_project(conn, project_id, by_user, replacing)


def _owner(conn: Connection, request: ConsumerAllocations) -> tuple[str, str] | None:
    """The project and user the consumer belongs to after the write."""
    project_id, user_id = request.project_id, request.user_id
    if project_id is None or user_id is None:
        existing = consumer_store.get_consumer(conn, request.consumer_uuid)
        if existing is None:
            return None
        project_id = project_id or existing["project_id"]
        user_id = user_id or existing["user_id"]
    return project_id, user_id


def _total(asks: Iterable[Ask]) -> Ask:
    resources: dict[str, int] = defaultdict(int)
    consumers = 0
    for ask in asks:
        for name, amount in ask.resources.items():
            resources[name] += amount
        consumers += ask.consumers
    return Ask(dict(resources), consumers)


def _check_scope(
    conn: Connection, project_id: str, user_id: str | None, limits: Limits, ask: Ask, replacing: Collection[str]
) -> None:
    limited = {resource: limit for resource, limit in limits.items() if _asked(ask, resource) > 0}
    if not limited:
        return  # nothing the write asks is limited here: no usage to count
    classes = any(resource != CONSUMERS for resource in limited)
    consumers = CONSUMERS in limited
    usage = usage_of(conn, project_id, user_id, classes=classes, consumers=consumers)
    held = usage_of(conn, project_id, user_id, among=replacing, classes=classes, consumers=consumers)
    for resource, limit in sorted(limited.items()):
        asked, used, holding = _asked(ask, resource), _used(usage, resource), _used(held, resource)
        if asked > holding and used - holding + asked > limit:
            raise _exceeded(project_id, user_id, resource, limit, used, asked, holding)


def _asked(ask: Ask, resource: str) -> int:
    return ask.consumers if resource == CONSUMERS else ask.resources.get(resource, 0)


def _used(usage: Usage, resource: str) -> int:
    return usage.consumers if resource == CONSUMERS else usage.resources.get(resource, 0)


def _exceeded(
    project_id: str, user_id: str | None, resource: str, limit: int, used: int, asked: int, holding: int
) -> Conflict:
    whose = f"project {project_id}" if user_id is None else f"user {user_id} of project {project_id}"
    replaced = f", of which the consumers written hold {holding} now" if holding else ""
    return Conflict(
        f"Quota exceeded for {resource} of {whose}: limit {limit}, usage {used}{replaced}, asked {asked}.",
        code=error_codes.QUOTA_EXCEEDED,
    )
