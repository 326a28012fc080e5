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


# The project's (or user's) consumers, through the index on (project_id, user_id); the parameters
# are the project, the user, then the consumers ``among`` (``IN {ids}``, filled last).
_PROJECT = "c.project_id = (SELECT id FROM projects WHERE external_id = ?)"
_USER = " AND c.user_id = (SELECT id FROM users WHERE external_id = ?)"
_AMONG = " AND c.uuid IN {ids}"
# Summed per class id, each consumer's allocations read through their index, the names joined last.
_BY_CLASS = """
SELECT rc.name, held.used FROM (
    SELECT a.resource_class_id, SUM(a.used) AS used
    FROM consumers c JOIN allocations a ON a.consumer_id = c.uuid
    WHERE {where}
    GROUP BY a.resource_class_id
) held JOIN resource_classes rc ON rc.id = held.resource_class_id"""
# A consumer's row goes with its last allocation; EXISTS counts only those holding some whatever wrote it.
_CONSUMERS = """
SELECT COUNT(*) FROM consumers c
WHERE {where} AND EXISTS (SELECT 1 FROM allocations a WHERE a.consumer_id = c.uuid)"""


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
    where = _PROJECT + ("" if user_id is None else _USER) + ("" if ids is None else _AMONG)
    held: dict[str, int] = {}
    if classes:
        held = {name: int(used) for name, used in fetch(conn, _BY_CLASS.format(where=where), params, ids=ids)}
    count = 0
    if consumers:
        count = int(fetch(conn, _CONSUMERS.format(where=where), params, ids=ids)[0][0])
    return Usage(held, count)
