"""The limits of projects, and of users within them, per resource class and on the number of consumers.

A project has a row in ``quota_projects`` exactly while it has a limit, its own or one of its users';
``lock_project`` locks that row for the writes here, so that two changes of one project's limits
(and the start or end of its counting) are made one after another. The claims do not take it: they
are ordered by the counter rows their writes update (``berth.store.quotas.enforcement``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sqlalchemy import Connection

from berth.store.quotas.usage import start_counting, stop_counting
from berth.store.rawsql import db_time, execute, execute_many, fetch, fetch_value
from berth.store.util import utcnow

# The resource a limit on the number of consumers holding allocations is set on.
CONSUMERS: Final = "consumers"
# The user of a project-wide limit.
PROJECT_WIDE: Final = ""

# resource (class name or CONSUMERS) -> limit
Limits = dict[str, int]

_CREATE_PROJECT = """
INSERT INTO quota_projects (project_id, created_at, updated_at) VALUES (?, ?, ?)
ON CONFLICT (project_id) DO UPDATE SET updated_at = excluded.updated_at"""
_LOCK = "SELECT 1 FROM quota_projects WHERE project_id = ?"
_LIMITS = "SELECT user_id, resource, hard_limit FROM quota_limits WHERE project_id = ?"
_LIMITS_OF = "SELECT resource, hard_limit FROM quota_limits WHERE project_id = ? AND user_id = ? ORDER BY resource"
_DELETE_LIMITS_OF = "DELETE FROM quota_limits WHERE project_id = ? AND user_id = ?"
_DELETE_ALL_LIMITS = "DELETE FROM quota_limits WHERE project_id = ?"
_DELETE_PROJECT = "DELETE FROM quota_projects WHERE project_id = ?"
_INSERT = """
INSERT INTO quota_limits (project_id, user_id, resource, hard_limit, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?)"""
_PROJECTS = "SELECT project_id FROM quota_projects ORDER BY project_id"
_USERS = "SELECT DISTINCT user_id FROM quota_limits WHERE project_id = ? AND user_id <> '' ORDER BY user_id"


def lock_project(conn: Connection, project_id: str) -> bool:
    """Hold the project's quota row until the transaction ends (PostgreSQL; on SQLite the write
    transaction holds every writer back already); False when the project has no limits."""
    lock = " FOR UPDATE" if conn.dialect.name == "postgresql" else ""
    return fetch_value(conn, _LOCK + lock, (project_id,)) is not None


def limits_by_user(conn: Connection, project_id: str) -> dict[str, Limits]:
    """Every limit of the project, by user (``PROJECT_WIDE`` for the project's own)."""
    found: dict[str, Limits] = {}
    for user_id, resource, limit in fetch(conn, _LIMITS, (project_id,)):
        found.setdefault(user_id, {})[resource] = limit
    return found


def limits_of(conn: Connection, project_id: str, user_id: str = PROJECT_WIDE) -> Limits:
    """The project's own limits, or those of one of its users."""
    return dict(fetch(conn, _LIMITS_OF, (project_id, user_id)))


def set_limits(conn: Connection, project_id: str, limits: Mapping[str, int], user_id: str = PROJECT_WIDE) -> None:
    """Replace the limits of the project (or of one of its users) with ``limits``; none left, the
    project's quota row goes too."""
    now = db_time(conn, utcnow())
    # Created (or kept) and locked first: another change of the project's limits waits for this one.
    execute(conn, _CREATE_PROJECT, (project_id, now, now))
    lock_project(conn, project_id)
    execute(conn, _DELETE_LIMITS_OF, (project_id, user_id))
    execute_many(
        conn, _INSERT, [(project_id, user_id, resource, limit, now, now) for resource, limit in sorted(limits.items())]
    )
    if not _drop_if_empty(conn, project_id):
        start_counting(conn, project_id)


def delete_limits(conn: Connection, project_id: str, user_id: str | None = None) -> bool:
    """Remove the limits of the project, its users' included (``user_id`` None), or of one user;
    False when there were none."""
    if not lock_project(conn, project_id):
        return False
    if user_id is None:
        execute(conn, _DELETE_ALL_LIMITS, (project_id,))
        execute(conn, _DELETE_PROJECT, (project_id,))
        stop_counting(conn, project_id)
        return True
    removed = execute(conn, _DELETE_LIMITS_OF, (project_id, user_id)) > 0
    _drop_if_empty(conn, project_id)
    return removed


def _drop_if_empty(conn: Connection, project_id: str) -> bool:
    """Drop the project's quota row, and stop counting its usage, when it has no limit left; whether
    it had none."""
    if fetch(conn, _LIMITS + " LIMIT 1", (project_id,)):
        return False
    execute(conn, _DELETE_PROJECT, (project_id,))
    stop_counting(conn, project_id)
    return True


def projects_with_limits(conn: Connection) -> list[str]:
    return [project_id for (project_id,) in fetch(conn, _PROJECTS)]


def users_with_limits(conn: Connection, project_id: str) -> list[str]:
    return [user_id for (user_id,) in fetch(conn, _USERS, (project_id,))]
