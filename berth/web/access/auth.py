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

from werkzeug.datastructures import Headers

from berth.domain.errors import BerthError
from berth.web.access.operator_files import read_yaml


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


class TokensFileError(ValueError):
    """A tokens file that cannot be read, or is not laid out as :class:`TokenFile` says."""


_ENTRY_FORM = "must map to its user_id (and optionally project_id, roles, system_scope: all)"


def _read_tokens(path: str) -> dict[object, object]:
    """The ``tokens`` mapping of the file; :class:`TokensFileError` naming the file and what is wrong."""
    data = read_yaml(path, "the tokens file", TokensFileError)
    tokens = data.get("tokens") if isinstance(data, dict) else None
    if not isinstance(tokens, dict):
        # The type only, not the value: a token written in the wrong place is still a secret.
        found = f"its 'tokens' is {_kind(tokens)}" if isinstance(data, dict) else f"it holds {_kind(data)}"
        raise TokensFileError(
            f"the tokens file {path} needs a mapping 'tokens' in which each token {_ENTRY_FORM}; {found}"
        )
    return tokens


def _kind(value: object) -> str:
    return "nothing" if value is None else f"a {type(value).__name__}"


class TokenFile:
    """Tokens and what they stand for, read once from a YAML file::

    tokens:
      7f3c...: {user_id: ops, project_id: admin, roles: [admin], system_scope: all}
      9a1e...: {user_id: nova, project_id: service, roles: [service]}
      c0d2...: {user_id: auditor, project_id: admin, roles: [reader], system_scope: all}
    """

    def __init__(self, path: str):
        data = _read_tokens(path)
        self.callers: dict[str, Caller] = {}
        # Entries are named by their place in the file, never by their token: the message is logged.
        for place, (token, entry) in enumerate(data.items(), start=1):
            if not isinstance(entry, dict) or entry.get("user_id") is None:
                raise TokensFileError(f"the tokens file {path}: token {place} {_ENTRY_FORM}; it maps to {entry!r}")
            roles = entry.get("roles", [])
            if not isinstance(roles, list):
                raise TokensFileError(f"the tokens file {path}: the roles of token {place} are not a list: {roles!r}")
            self.callers[str(token)] = Caller(
                user_id=str(entry["user_id"]),
                project_id=str(entry.get("project_id", entry["user_id"])),
                roles=[str(r) for r in roles],
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
            raise TokensFileError("the tokens strategy needs a tokens file")
        return TokenFile(tokens_file)
    if strategy == "keystone":
        return keystone_caller
    raise ValueError(f"unknown auth strategy {strategy!r}")
