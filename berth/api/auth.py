"""Who is calling, and whether they may.

The development mode behaves like Placement's ``noauth2``: every request but ``GET /`` needs an
``X-Auth-Token``; the token ``admin`` carries the admin role, ``user[:project]`` names the caller, and an
``X-Roles`` header replaces the roles.  Access is decided by Placement's legacy default policy, under
which every operation requires the admin role.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from berth.domain.errors import BerthError, Forbidden


class Unauthorized(BerthError):
    status = 401


@dataclass
class Caller:
    user_id: str
    project_id: str
    roles: list[str] = field(default_factory=list)

    @property
    def is_admin(self) -> bool:
        return "admin" in self.roles


def caller_from_noauth_headers(headers) -> Caller:
    token = headers.get("X-Auth-Token")
    if token is None:
        raise Unauthorized("The request you have made requires authentication.")
    user_id, _, project_id = token.partition(":")
    project_id = project_id or user_id
    roles = ["admin"] if user_id == "admin" else []
    if headers.get("X-Roles") is not None:
        roles = [r.strip() for r in headers["X-Roles"].split(",") if r.strip()]
    return Caller(user_id=user_id, project_id=project_id, roles=roles)


class LegacyPolicy:
    """Placement's legacy defaults: every rule is ``role:admin``."""

    def authorize(self, caller: Caller, rule: str) -> None:
        if not caller.is_admin:
            raise Forbidden(f"Policy does not allow {rule} to be performed.")
