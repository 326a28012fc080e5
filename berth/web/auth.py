"""Who is calling.

Three strategies, chosen with ``berth serve --auth-strategy``:

- ``noauth2`` (development, the default) behaves like Placement's: every request but ``GET /`` needs
  an ``X-Auth-Token``; the token ``admin`` carries the admin role, ``user[:project]`` names the caller;
  ``X-Roles`` and ``X-Project-Id`` headers replace the roles and the project, and
  ``OpenStack-System-Scope`` makes the token system-scoped.
- ``tokens`` reads a YAML file mapping each token to a user, a project, roles and optionally
  ``system_scope: all``; any other token is refused.
- ``keystone`` trusts the identity headers set by keystonemiddleware's ``auth_token`` filter, which
  must wrap the application (see the README).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeAlias

import yaml
from werkzeug.datastructures import Headers

from berth.domain.errors import BerthError


class Unauthorized(BerthError):
    status = 401


@dataclass
class Caller:
    user_id: str
    project_id: str
    roles: list[str] = field(default_factory=list)
    system_scope: str | None = None


# Who a request's headers name, or Unauthorized.
Authenticator: TypeAlias = Callable[[Headers], Caller]


def _required_token(headers: Headers) -> str:
    token = headers.get("X-Auth-Token")
    if token is None:
        raise Unauthorized("The request you have made requires authentication.")
    return token


def noauth_caller(headers: Headers) -> Caller:
    user_id, _, project_id = _required_token(headers).partition(":")
    project_id = project_id or user_id
    roles = ["admin"] if user_id == "admin" else []
    if headers.get("X-Roles"):
        roles = [r.strip() for r in headers["X-Roles"].split(",") if r.strip()]
    return Caller(
        user_id=user_id,
        project_id=headers.get("X-Project-Id") or project_id,
        roles=roles,
        system_scope=headers.get("OpenStack-System-Scope"),
    )


class TokenFile:
    """Tokens and what they stand for, read once from a YAML file::

    tokens:
      7f3c...: {user_id: ops, project_id: admin, roles: [admin], system_scope: all}
      9a1e...: {user_id: nova, project_id: service, roles: [service]}
      c0d2...: {user_id: auditor, project_id: admin, roles: [reader], system_scope: all}
    """

    def __init__(self, path: str):
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle) or {}
        self.callers: dict[str, Caller] = {}
        for token, entry in (data.get("tokens") or {}).items():
            self.callers[str(token)] = Caller(
                user_id=str(entry["user_id"]),
                project_id=str(entry.get("project_id", entry["user_id"])),
                roles=[str(r) for r in entry.get("roles", [])],
                system_scope=entry.get("system_scope"),
            )

    def __call__(self, headers: Headers) -> Caller:
        caller = self.callers.get(_required_token(headers))
        if caller is None:
            raise Unauthorized("The request you have made requires authentication.")
        return caller


def keystone_caller(headers: Headers) -> Caller:
    if headers.get("X-Identity-Status") != "Confirmed":
        raise Unauthorized("The request you have made requires authentication.")
    return Caller(
        user_id=headers.get("X-User-Id", ""),
        project_id=headers.get("X-Project-Id", ""),
        roles=[r.strip() for r in headers.get("X-Roles", "").split(",") if r.strip()],
        system_scope=headers.get("OpenStack-System-Scope"),
    )


def authenticator(strategy: str, tokens_file: str | None = None) -> Authenticator:
    if strategy == "noauth2":
        return noauth_caller
    if strategy == "tokens":
        if not tokens_file:
            raise ValueError("the tokens strategy needs a tokens file")
        return TokenFile(tokens_file)
    if strategy == "keystone":
        return keystone_caller
    raise ValueError(f"unknown auth strategy {strategy!r}")
