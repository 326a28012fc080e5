"""/berth/quotas: the limits of projects and of users within them, and their usage
(``berth.store.quotas``). Berth's own, outside the Placement API; docs/pick-and-claim.md, "Quotas".
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from berth.api.call import Call
from berth.api.responses import json_response
from berth.api.schemas.claims.quotas import QUOTA_PUT
from berth.domain import error_codes
from berth.domain.errors import BadRequest, NotFound
from berth.store.placement.names import resource_class_ids
from berth.store.quotas import limits as quota_limits
from berth.store.quotas.limits import CONSUMERS, PROJECT_WIDE, Limits
from berth.store.quotas.usage import usage_of
from berth.web.responses import Reply, empty_response


def list_quotas(call: Call) -> Reply:
    def work(conn: Connection) -> list[dict[str, Any]]:
        return [_project_view(conn, project_id) for project_id in quota_limits.projects_with_limits(conn)]

    return json_response(call, {"quotas": call.db.read(work)})


def show_project_quota(call: Call, project_id: str) -> Reply:
    return json_response(call, call.db.read(lambda conn: _project_view(conn, project_id)))


def set_project_quota(call: Call, project_id: str) -> Reply:
    return json_response(call, _set(call, project_id, PROJECT_WIDE))


def delete_project_quota(call: Call, project_id: str) -> Reply:
    if not call.db.write(lambda conn: quota_limits.delete_limits(conn, project_id)):
        raise NotFound(f"Project {project_id} has no quota limits.")
    return empty_response()


def show_user_quota(call: Call, project_id: str, user_id: str) -> Reply:
    return json_response(call, call.db.read(lambda conn: _user_view(conn, project_id, user_id)))


def set_user_quota(call: Call, project_id: str, user_id: str) -> Reply:
    return json_response(call, _set(call, project_id, user_id))


def delete_user_quota(call: Call, project_id: str, user_id: str) -> Reply:
    if not call.db.write(lambda conn: quota_limits.delete_limits(conn, project_id, user_id)):
        raise NotFound(f"User {user_id} of project {project_id} has no quota limits.")
    return empty_response()


# The longest project or user id a limit is kept under: the length of the quota tables' columns
# (berth.store.schema), as for a consumer's ids in allocations. PostgreSQL refuses a longer one.
MAX_ID_LENGTH = 255


def _set(call: Call, project_id: str, user_id: str) -> dict[str, Any]:
    for what, value in (("project_id", project_id), ("user_id", user_id)):
        if len(value) > MAX_ID_LENGTH:
            raise BadRequest(f"Invalid {what}: {len(value)} characters, where at most {MAX_ID_LENGTH} are allowed.")
    limits: Limits = call.json_body(QUOTA_PUT)["limits"]
    negative = sorted(resource for resource, limit in limits.items() if limit < 0)
    if negative:
        raise BadRequest(
            f"The limit of {negative[0]} is {limits[negative[0]]}: a limit is zero or more "
            "(leave a resource out for no limit).",
            code=error_codes.QUOTA_BAD_LIMIT,
        )

    def work(conn: Connection) -> dict[str, Any]:
        classes = {resource for resource in limits if resource != CONSUMERS}
        unknown = sorted(classes - resource_class_ids(conn, classes).keys())
        if unknown:
            raise BadRequest(
                f"No such resource class {unknown[0]}: a limit is set on a resource class or on {CONSUMERS!r}.",
                code=error_codes.QUOTA_UNKNOWN_RESOURCE,
            )
        quota_limits.set_limits(conn, project_id, limits, user_id)
        if user_id == PROJECT_WIDE:
            return _project_view(conn, project_id)
        return _user_view(conn, project_id, user_id)

    return call.db.write(work)


def _project_view(conn: Connection, project_id: str) -> dict[str, Any]:
    limits = quota_limits.limits_of(conn, project_id)
    return {
        "project_id": project_id,
        "limits": limits,
        "usage": _usage(conn, project_id, None, limits),
        "users": quota_limits.users_with_limits(conn, project_id),
    }


def _user_view(conn: Connection, project_id: str, user_id: str) -> dict[str, Any]:
    limits = quota_limits.limits_of(conn, project_id, user_id)
    return {
        "project_id": project_id,
        "user_id": user_id,
        "limits": limits,
        "usage": _usage(conn, project_id, user_id, limits),
    }


def _usage(conn: Connection, project_id: str, user_id: str | None, limits: Limits) -> dict[str, int]:
    """Every class held, every class limited (0 when none is held), and the consumers."""
    usage = usage_of(conn, project_id, user_id)
    held = {resource: 0 for resource in limits if resource != CONSUMERS}
    held.update(usage.resources)
    return {**dict(sorted(held.items())), CONSUMERS: usage.consumers}
