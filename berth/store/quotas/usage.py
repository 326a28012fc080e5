"""What a project, or one user within it, holds: the sum of its consumers' allocations per resource
class, and how many of its consumers hold allocations, as Nova counts usage from Placement. A
consumer whose allocations are all gone has no row left (the allocation writes delete it), so it
counts for nothing.

A project with limits is counted as it changes: triggers on ``allocations`` and ``consumers``
(migration 0012) keep its sums in ``quota_usage`` while it has a row in ``quota_counted_projects``,
which ``start_counting`` adds, from the sums, when its first limit is set, and ``stop_counting``
removes with its last. Its usage is then read in one lookup whatever the number of its consumers;
another project's is summed from its allocations.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from sqlalchemy import Connection

from berth.store.placement import consumers as consumer_store
from berth.store.rawsql import execute, fetch, fetch_value


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


# The counters of a counted project (no row at all: not counted), ``user_pk`` 0 for the project's own;
# resource class id 0 is the number of consumers holding allocations.
_COUNTED = """
SELECT u.resource_class_id, rc.name, u.used
FROM projects p
JOIN quota_counted_projects q ON q.project_pk = p.id
LEFT JOIN quota_usage u ON u.project_pk = q.project_pk AND u.user_pk = {user}
LEFT JOIN resource_classes rc ON rc.id = u.resource_class_id
WHERE p.external_id = ?"""
_PROJECT_ROW = "0"
_USER_ROW = "COALESCE((SELECT id FROM users WHERE external_id = ?), -1)"


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
    if among is None:
        counted = _counted(conn, project_id, user_id)
        if counted is not None:
            return counted
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


def _counted(conn: Connection, project_id: str, user_id: str | None) -> Usage | None:
    """The project's (or user's) usage from its counters; None when the project is not counted."""
    if user_id is None:
        rows = fetch(conn, _COUNTED.format(user=_PROJECT_ROW), (project_id,))
    else:
        rows = fetch(conn, _COUNTED.format(user=_USER_ROW), (user_id, project_id))
    if not rows:
        return None
    held = {name: int(used) for class_id, name, used in rows if class_id and name is not None and used}
    consumers = sum(int(used) for class_id, _, used in rows if class_id == 0)
    return Usage(held, consumers)


_IS_COUNTED = "SELECT 1 FROM quota_counted_projects WHERE project_pk = ?"
_MARK_COUNTED = "INSERT INTO quota_counted_projects (project_pk) VALUES (?)"
_FORGET = "DELETE FROM quota_usage WHERE project_pk = ?"
_UNMARK = "DELETE FROM quota_counted_projects WHERE project_pk = ?"
# The project's sums as they stand: per class and user (and the project's own, user_pk 0), and, under
# class id 0, how many consumers hold allocations.
_INITIAL_SUMS = """
INSERT INTO quota_usage (project_pk, user_pk, resource_class_id, used)
SELECT c.project_id, CASE s.own WHEN 0 THEN 0 ELSE c.user_id END AS scope, a.resource_class_id, SUM(a.used)
FROM consumers c JOIN allocations a ON a.consumer_id = c.uuid, (SELECT 0 AS own UNION ALL SELECT 1) s
WHERE c.project_id = ?
GROUP BY c.project_id, scope, a.resource_class_id
UNION ALL
SELECT c.project_id, CASE s.own WHEN 0 THEN 0 ELSE c.user_id END AS scope, 0, COUNT(*)
FROM consumers c, (SELECT 0 AS own UNION ALL SELECT 1) s
WHERE c.project_id = ? AND EXISTS (SELECT 1 FROM allocations a WHERE a.consumer_id = c.uuid)
GROUP BY c.project_id, scope"""


def start_counting(conn: Connection, project_id: str) -> None:
    """Count the project's usage as it changes from now on, starting from its sums (a no-op when it
    is counted already). Called under the project's quota lock, when its first limit is set.

    On PostgreSQL every writer of consumers and allocations is held back until the transaction
    ends (a SHARE lock on both tables): the sums then include every committed write, and every
    later write sees the project counted. Setting a project's first limit is rare; the writes of
    every other moment take no lock of this."""
    project_pk = consumer_store.project_pk(conn, project_id)
    if fetch_value(conn, _IS_COUNTED, (project_pk,)) is not None:
        return
    if conn.dialect.name == "postgresql":
        execute(conn, "LOCK TABLE consumers, allocations IN SHARE MODE")
    execute(conn, _FORGET, (project_pk,))
    execute(conn, _MARK_COUNTED, (project_pk,))
    execute(conn, _INITIAL_SUMS, (project_pk, project_pk))


def stop_counting(conn: Connection, project_id: str) -> None:
    """No longer count the project (its last limit removed): its writes pay nothing for it again."""
    project_pk = consumer_store.lookup_project_pk(conn, project_id)
    if project_pk is not None:
        execute(conn, _UNMARK, (project_pk,))
        execute(conn, _FORGET, (project_pk,))
