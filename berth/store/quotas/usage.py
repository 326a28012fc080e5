"""What a project, or one user within it, holds: the sum of its consumers' allocations per resource
class, and how many of its consumers hold allocations, counted from the allocations themselves as Nova
counts usage from Placement. A consumer whose allocations are all gone has no row left (the
allocation writes delete it), so it counts for nothing.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from sqlalchemy import Connection

from berth.store.rawsql import fetch


@dataclass(frozen=True)
class Usage:
    """Held per resource class (by name) and the number of consumers holding allocations."""

    resources: dict[str, int] = field(default_factory=dict)
    consumers: int = 0


def _scope(*, of_user: bool, among: bool, by_class: bool) -> str:
    """FROM and WHERE of the allocations of a project's (or a user's) consumers; the parameters
    are the project, the user, then the consumers ``among`` (``IN {ids}``, filled last)."""
    sql = "FROM allocations a JOIN consumers c ON c.uuid = a.consumer_id JOIN projects p ON p.id = c.project_id"
    if by_class:
        sql += " JOIN resource_classes rc ON rc.id = a.resource_class_id"
    if of_user:
        sql += " JOIN users u ON u.id = c.user_id"
    sql += " WHERE p.external_id = ?"
    if of_user:
        sql += " AND u.external_id = ?"
    if among:
        sql += " AND a.consumer_id IN {ids}"
    return sql


def usage_of(
    conn: Connection,
    project_id: str,
    user_id: str | None = None,
    *,
    among: Collection[str] | None = None,
    classes: bool = True,
    consumers: bool = True,
) -> Usage:
    """The usage of the project, or of one user within it; with ``among``, only that of those
    consumers. ``classes`` and ``consumers`` say what to count (what is not counted is left at none)."""
    if among is not None and not among:
        return Usage()
    params = (project_id,) if user_id is None else (project_id, user_id)
    ids = sorted(among) if among is not None else None
    shape = {"of_user": user_id is not None, "among": ids is not None}
    held: dict[str, int] = {}
    if classes:
        sql = f"SELECT rc.name, SUM(a.used) {_scope(by_class=True, **shape)} GROUP BY rc.name"
        held = {name: int(used) for name, used in fetch(conn, sql, params, ids=ids)}
    count = 0
    if consumers:
        sql = f"SELECT COUNT(DISTINCT a.consumer_id) {_scope(by_class=False, **shape)}"
        count = int(fetch(conn, sql, params, ids=ids)[0][0])
    return Usage(held, count)
