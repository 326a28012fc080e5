"""Server groups: which hosts their members are on, and the lock that serialises their placements.

A group is created by the first pick that names it and keeps the policy it was created with. Every
pick for a group first locks the group's row, so that picks for one group run one after another: the
second sees the first one's allocations before it decides, and two members of an anti-affinity group
can never both take the same host however many race. On SQLite every writer holds the database's
write lock already; on PostgreSQL the row lock does it, taken by an ``INSERT ... ON CONFLICT DO
NOTHING`` (which waits for a concurrent creator of the same group) and a ``SELECT ... FOR UPDATE``.

A member counts on the hosts where its consumer holds allocations now, not where it was placed: a
member whose allocations were deleted through the Placement API (by whatever path: DELETE, an
empty PUT or POST, a reshape) no longer counts, and one whose allocations were moved counts where
they went. Those paths therefore stay as Placement defines them and need no cleanup step of their
own; a member without allocations is dropped from the table the next time its group is locked.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from sqlalchemy import Connection

from berth.domain import error_codes
from berth.domain.errors import Conflict
from berth.store.rawsql import db_time, execute, fetch, fetch_value, insert_rows
from berth.store.util import utcnow

GroupPolicy: TypeAlias = Literal["affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity"]
GROUP_POLICIES: Final[tuple[GroupPolicy, ...]] = ("affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity")

_CREATE = """
INSERT INTO server_groups (uuid, policy, created_at, updated_at) VALUES (?, ?, ?, ?)
ON CONFLICT (uuid) DO NOTHING"""
_POLICY = "SELECT policy FROM server_groups WHERE uuid = ?"
_FORGET_DEPARTED = """
DELETE FROM server_group_members WHERE group_uuid = ?
AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.consumer_id = server_group_members.consumer_uuid)"""
_MEMBER_PLACES = """
SELECT m.consumer_uuid, a.resource_provider_id, p.root_provider_id
FROM server_group_members m
JOIN allocations a ON a.consumer_id = m.consumer_uuid
JOIN resource_providers p ON p.id = a.resource_provider_id
WHERE m.group_uuid = ?"""
_ADD_MEMBERS = "INSERT INTO server_group_members (group_uuid, consumer_uuid, root_provider_id, created_at)"
_ADDED_MEMBER = "(?, ?, ?, ?)"
_ON_A_MEMBER_AGAIN = (
    " ON CONFLICT (group_uuid, consumer_uuid) DO UPDATE SET root_provider_id = excluded.root_provider_id"
)
_ADD_MEMBER = f"{_ADD_MEMBERS} VALUES {_ADDED_MEMBER}{_ON_A_MEMBER_AGAIN}"


def lock_group(conn: Connection, group_uuid: str, policy: GroupPolicy) -> None:
    """Create the group if it is new and hold its row until the transaction ends; a 409 when it
    exists with another policy."""
    now = db_time(conn, utcnow())
    execute(conn, _CREATE, (group_uuid, policy, now, now))
    lock = " FOR UPDATE" if conn.dialect.name == "postgresql" else ""
    existing = fetch_value(conn, _POLICY + lock, (group_uuid,))
    if existing != policy:
        raise Conflict(
            f"Server group {group_uuid} has the policy {existing}, not {policy}.",
            code=error_codes.SERVER_GROUP_POLICY_CONFLICT,
        )
    execute(conn, _FORGET_DEPARTED, (group_uuid,))


@dataclass(frozen=True)
class ServerGroup:
    """A group as a pick names it."""

    uuid: str
    policy: GroupPolicy
    # The member a move is placing again: where it is now does not count against the policy (a lone
    # member of an anti-affinity group may be resized on its own host).
    moving_member: str | None = None


def member_hosts(conn: Connection, group: ServerGroup, sharing_ids: Collection[int]) -> Counter[int]:
    """How many of the group's members hold allocations in each tree (by root provider id), the
    member a move is placing again left out.

    Sharing providers are no host: a member's disk on a shared pool does not put it on the pool's
    tree.
    """
    roots_of: defaultdict[str, set[int]] = defaultdict(set)
    for consumer_uuid, provider_id, root_id in fetch(conn, _MEMBER_PLACES, (group.uuid,)):
        if provider_id not in sharing_ids and consumer_uuid != group.moving_member:
            roots_of[consumer_uuid].add(root_id)
    return Counter(root for roots in roots_of.values() for root in roots)


def add_member(conn: Connection, group_uuid: str, consumer_uuid: str, root_id: int) -> None:
    """Record the consumer as a member placed on the tree of ``root_id`` (the group must be locked)."""
    execute(conn, _ADD_MEMBER, (group_uuid, consumer_uuid, root_id, db_time(conn, utcnow())))


def add_members(conn: Connection, group_uuid: str, placed: Sequence[tuple[str, int]]) -> None:
    """``add_member`` of each (distinct) consumer and root of ``placed``, in one statement (a gang's)."""
    now = db_time(conn, utcnow())
    insert_rows(
        conn,
        _ADD_MEMBERS,
        _ADDED_MEMBER,
        [(group_uuid, consumer_uuid, root_id, now) for consumer_uuid, root_id in placed],
        _ON_A_MEMBER_AGAIN,
    )
