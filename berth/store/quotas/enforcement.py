"""The quota check of a claim, made inside the claim's own write transaction, after it writes.

A write is judged by the usage it leaves: after the allocations (and a preempting pick's removal
of its victims) are written, the project's usage, and each user's, is read from the counters the
write's own triggers have just moved (``berth.store.quotas.usage``), and the write is refused
(409 ``berth.quota.exceeded``) when, for a resource whose usage it raises, that usage passes the
limit. On PostgreSQL the triggers' updates lock the project's counter rows until the commit, in
key order, so the claims of one project are ordered from their write to their commit, not through
their search: each reads its counters after those before it committed. On SQLite the write
transaction holds every other writer back already.

A write raises a resource's usage when what it gives its consumers, ``asked``, is more than what
it takes away, ``held`` (what the written consumers held before, which it replaces, or what a
preempting pick's victims of the same project or user held), and what a move's pick places again,
``kept`` (what the instance it moves holds on its source: still counted until the move lands and
the source's allocations go, so left out of the usage the write is judged by). A write that does
not raise a resource's usage is never refused for it, so a project over a lowered limit may still
shrink. A refusal leaves the transaction to be rolled back: nothing of the claim is written. A
project without limits costs one lookup.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sqlalchemy import Connection

from berth.domain import error_codes
from berth.domain.candidate_query import CandidateQuery
from berth.domain.errors import Conflict
from berth.store.placement import consumers as consumer_store
from berth.store.placement.allocations import ConsumerAllocations
from berth.store.quotas.limits import CONSUMERS, PROJECT_WIDE, Limits, limits_by_user
from berth.store.quotas.usage import Usage, usage_of
from berth.store.rawsql import fetch


@dataclass(frozen=True)
class Change:
    """What a write does to the usage of one project's (or one user's) consumers: what it gives
    them (per resource class, and how many of them hold allocations after it), and what it takes
    away (what the consumers it writes held before it, or the consumers it removes held)."""

    asked: Mapping[str, int] = field(default_factory=dict)
    consumers: int = 0
    held: Usage = field(default_factory=Usage)
    # What the instance a move's pick places again holds: given back once the move lands.
    kept: Usage = field(default_factory=Usage)


@dataclass(frozen=True)
class ProjectChange:
    """What a write does to one project's usage: in all, and to each of its users' it writes."""

    total: Change
    by_user: Mapping[str, Change]


# project -> what a write does to it
Changes = dict[str, ProjectChange]


@dataclass(frozen=True)
class Released:
    """What a consumer a write removes (a preempting pick's victim) held, and whose it was."""

    project_id: str
    user_id: str
    held: Mapping[str, int]


def asked_by_query(query: CandidateQuery) -> dict[str, int]:
    """What any allocation request answering the query allocates, per resource class."""
    asked: dict[str, int] = defaultdict(int)
    for group in query.groups:
        for name, amount in group.resources:
            asked[name] += amount
    return dict(asked)


def claim_changes(
    claims: Iterable[tuple[str, str, Mapping[str, int]]],
    released: Iterable[Released] = (),
    kept: Iterable[Released] = (),
) -> Changes:
    """The changes of new consumers claimed (each its project, user and what it was given), of the
    consumers removed to make room for them, and of the instances their moves place again."""
    asked: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    consumers: dict[tuple[str, str], int] = defaultdict(int)
    for project_id, user_id, given in claims:
        for name, amount in given.items():
            asked[(project_id, user_id)][name] += amount
        consumers[(project_id, user_id)] += 1
    held, moving = _held_by_owner(released), _held_by_owner(kept)
    by_project: dict[str, dict[str, Change]] = defaultdict(dict)
    for key in consumers:
        by_project[key[0]][key[1]] = Change(
            dict(asked[key]), consumers[key], held.get(key, Usage()), moving.get(key, Usage())
        )
    for key in (held.keys() | moving.keys()) - consumers.keys():
        if key[0] in by_project:  # a project the write does not add to is never refused
            by_project[key[0]][key[1]] = Change(held=held.get(key, Usage()), kept=moving.get(key, Usage()))
    return {project_id: ProjectChange(_total(by_user.values()), by_user) for project_id, by_user in by_project.items()}


def _held_by_owner(consumers: Iterable[Released]) -> dict[tuple[str, str], Usage]:
    """What ``consumers`` hold, summed by project and user, with how many they are."""
    held: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    count: dict[tuple[str, str], int] = defaultdict(int)
    for consumer in consumers:
        key = (consumer.project_id, consumer.user_id)
        for name, amount in consumer.held.items():
            held[key][name] += amount
        count[key] += 1
    return {key: Usage(dict(held[key]), count[key]) for key in count}


def allocation_write_changes(conn: Connection, requests: Sequence[ConsumerAllocations]) -> Changes:
    """Before a Placement allocation write (PUT or POST /allocations): what it will do to each
    project's and user's usage, what the consumers it writes hold now read before it replaces them."""
    asked: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
    consumers: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for request in requests:
        owner = _owner(conn, request)
        if owner is None:
            continue  # a new consumer without a project: the write refuses it (400)
        project_id, user_id = owner
        given = asked[project_id][user_id]
        for by_class in request.allocations.values():
            for name, amount in by_class.items():
                given[name] += amount
        if any(request.allocations.values()):
            consumers[project_id][user_id] += 1
    replacing = sorted({request.consumer_uuid for request in requests})
    changes: Changes = {}
    for project_id, by_user in asked.items():
        if not limits_by_user(conn, project_id):
            continue  # nothing to count: the write cannot take it over a limit
        users = {
            user_id: Change(
                dict(given), consumers[project_id][user_id], usage_of(conn, project_id, user_id, among=replacing)
            )
            for user_id, given in by_user.items()
        }
        # What the project's consumers among those written hold now, whichever user they belong to.
        total = _total(users.values())
        changes[project_id] = ProjectChange(
            Change(total.asked, total.consumers, usage_of(conn, project_id, among=replacing)), users
        )
    return changes


def check_written(conn: Connection, changes: Mapping[str, ProjectChange]) -> set[str]:
    """After the write: refuse (409) it when it took a project, or a user within one, over a limit
    on a resource whose usage it raised. The projects that had limits."""
    return {project_id for project_id in sorted(changes) if _check_project(conn, project_id, lambda: changes)}


def check_claims(
    conn: Connection,
    claims: Sequence[tuple[str, str, Mapping[str, int]]],
    released: Iterable[Released] = (),
    kept: Iterable[Released] = (),
) -> set[str]:
    """``check_written`` of ``claim_changes(claims, released, kept)``, the changes worked out only
    once a project has limits: a pick's project usually has none, and then costs one lookup and no
    more."""
    worked_out: list[Changes] = []

    def changes() -> Changes:
        if not worked_out:
            worked_out.append(claim_changes(claims, released, kept))
        return worked_out[0]

    projects = sorted({project_id for project_id, _, _ in claims})
    return {project_id for project_id in projects if _check_project(conn, project_id, changes)}


# Every limit of the project with the usage its counters hold now, in one statement (on PostgreSQL
# one round trip fewer while the write holds the project's counter rows): user ('' for the
# project's own), resource, limit, usage, and whether the project is counted. A user or class with
# no counter row yet holds nothing.
_LIMITS_WITH_USAGE = f"""
SELECT l.user_id, l.resource, l.hard_limit, COALESCE(u.used, 0), q.project_pk IS NOT NULL
FROM quota_limits l
LEFT JOIN projects p ON p.external_id = l.project_id
LEFT JOIN quota_counted_projects q ON q.project_pk = p.id
LEFT JOIN users us ON us.external_id = l.user_id
LEFT JOIN resource_classes rc ON rc.name = l.resource
LEFT JOIN quota_usage u ON u.project_pk = p.id
    AND u.user_pk = CASE WHEN l.user_id = '{PROJECT_WIDE}' THEN 0 ELSE us.id END
    AND u.resource_class_id = CASE WHEN l.resource = '{CONSUMERS}' THEN 0 ELSE rc.id END
WHERE l.project_id = ?"""


def _check_project(conn: Connection, project_id: str, changes: Callable[[], Mapping[str, ProjectChange]]) -> bool:
    """Whether the project has limits (checked, then, against its change among ``changes()``)."""
    rows = fetch(conn, _LIMITS_WITH_USAGE, (project_id,))
    if not rows:
        return False
    change = changes()[project_id]
    limits: dict[str, Limits] = defaultdict(dict)
    used: dict[str, Usage] = {}
    counted = all(row[4] for row in rows)
    for user_id, resource, limit, now, _ in rows:
        limits[user_id][resource] = int(limit)
        scope = used.setdefault(user_id, Usage())
        if resource == CONSUMERS:
            used[user_id] = Usage(scope.resources, int(now))
        else:
            scope.resources[resource] = int(now)
    if not counted:
        # Every project with limits is counted (``berth.store.quotas.usage.start_counting``); were
        # one not, its usage is summed.
        used = {}
    _check_scope(conn, project_id, None, limits.get(PROJECT_WIDE, {}), change.total, used.get(PROJECT_WIDE))
    for user_id in sorted(change.by_user):
        _check_scope(conn, project_id, user_id, limits.get(user_id, {}), change.by_user[user_id], used.get(user_id))
    return True


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


def _total(changes: Iterable[Change]) -> Change:
    listed = list(changes)
    asked: dict[str, int] = defaultdict(int)
    for change in listed:
        for name, amount in change.asked.items():
            asked[name] += amount
    consumers = sum(change.consumers for change in listed)
    return Change(dict(asked), consumers, _summed(c.held for c in listed), _summed(c.kept for c in listed))


def _summed(usages: Iterable[Usage]) -> Usage:
    resources: dict[str, int] = defaultdict(int)
    consumers = 0
    for usage in usages:
        for name, amount in usage.resources.items():
            resources[name] += amount
        consumers += usage.consumers
    return Usage(dict(resources), consumers)


def _check_scope(
    conn: Connection, project_id: str, user_id: str | None, limits: Limits, change: Change, usage: Usage | None
) -> None:
    """``usage``: the scope's usage after the write, of every limited resource, when the caller read it."""
    raised = {
        resource: limit
        for resource, limit in limits.items()
        if _asked(change, resource) > _used(change.held, resource) + _used(change.kept, resource)
    }
    if not raised:
        return  # nothing the write raises is limited here: no usage to read
    if usage is None:
        classes = any(resource != CONSUMERS for resource in raised)
        consumers = CONSUMERS in raised
        usage = usage_of(conn, project_id, user_id, classes=classes, consumers=consumers)
    for resource, limit in sorted(raised.items()):
        after, kept = _used(usage, resource), _used(change.kept, resource)
        if after - kept > limit:
            asked, holding = _asked(change, resource), _used(change.held, resource)
            raise exceeded(project_id, user_id, resource, limit, after - asked + holding, asked, holding, kept)


def _asked(change: Change, resource: str) -> int:
    return change.consumers if resource == CONSUMERS else change.asked.get(resource, 0)


def _used(usage: Usage, resource: str) -> int:
    return usage.consumers if resource == CONSUMERS else usage.resources.get(resource, 0)


def exceeded(
    project_id: str,
    user_id: str | None,
    resource: str,
    limit: int,
    used: int,
    asked: int,
    holding: int,
    kept: int = 0,
) -> Conflict:
    """The refusal; ``used``: the usage before the write, of which it frees ``holding`` and the
    instance it moves gives back ``kept`` once the move lands."""
    whose = f"project {project_id}" if user_id is None else f"user {user_id} of project {project_id}"
    replaced = f", of which the write frees {holding}" if holding else ""
    moved = f", of which the instance moved gives back {kept} once the move lands" if kept else ""
    return Conflict(
        f"Quota exceeded for {resource} of {whose}: limit {limit}, usage {used}{replaced}{moved}, asked {asked}.",
        code=error_codes.QUOTA_EXCEEDED,
    )
