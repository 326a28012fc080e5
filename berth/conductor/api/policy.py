"""The conductors' access rules and their defaults, under oslo.policy like the service's.

Secure RBAC (the default): a project's members make and change its servers and server groups, its
readers read them; the cloud's admin does everything, and alone moves servers between hosts
(migrate, live-migrate, evacuate), manages flavors and hosts; a host's agent registers with the
service role. With the legacy defaults (``--no-enforce-new-defaults``) a project's own tokens need no
role, as Nova's ``admin_or_owner`` granted."""

from __future__ import annotations

from typing import Final

from berth.web.access.policy import RuleDefinition

ADMIN: Final = "role:admin"
OWNER: Final = "project_id:%(project_id)s"
MEMBER: Final = f"role:admin or (role:member and {OWNER})"
READER: Final = f"role:admin or (role:reader and {OWNER}) or (role:member and {OWNER})"
ANY_MEMBER: Final = "role:admin or role:member"
ANY_READER: Final = "role:admin or role:member or role:reader"
LEGACY_OWNER: Final = f"role:admin or {OWNER}"
ANYONE: Final = "@"

# Actions only the cloud's admin may start, as in Nova: they choose or change a server's host.
ADMIN_ACTIONS: Final = frozenset({"migrate", "os-migrateLive", "evacuate"})


def _rule(name: str, check: str, method: str, path: str, legacy: str | None = None) -> RuleDefinition:
    return RuleDefinition(name, check, legacy_check=legacy, method=method, path=path)


RULES: Final = [
    _rule("berth:servers:create", ANY_MEMBER, "POST", "/servers", ANYONE),
    _rule("berth:servers:index", ANY_READER, "GET", "/servers", ANYONE),
    _rule("berth:servers:index:all_projects", ADMIN, "GET", "/servers?all_projects=1"),
    _rule("berth:servers:show", READER, "GET", "/servers/{id}", LEGACY_OWNER),
    _rule("berth:servers:delete", MEMBER, "DELETE", "/servers/{id}", LEGACY_OWNER),
    _rule("berth:servers:action", MEMBER, "POST", "/servers/{id}/action", LEGACY_OWNER),
    _rule("berth:servers:action:admin", ADMIN, "POST", "/servers/{id}/action (migrate, live-migrate, evacuate)"),
    _rule("berth:flavors:index", ANYONE, "GET", "/flavors"),
    _rule("berth:flavors:manage", ADMIN, "POST", "/flavors"),
    _rule("berth:server_groups:create", ANY_MEMBER, "POST", "/os-server-groups", ANYONE),
    _rule("berth:server_groups:index", ANY_READER, "GET", "/os-server-groups", ANYONE),
    _rule("berth:server_groups:index:all_projects", ADMIN, "GET", "/os-server-groups?all_projects=1"),
    _rule("berth:server_groups:show", READER, "GET", "/os-server-groups/{id}", LEGACY_OWNER),
    _rule("berth:server_groups:delete", MEMBER, "DELETE", "/os-server-groups/{id}", LEGACY_OWNER),
    _rule("berth:hosts:register", "role:service or role:admin", "PUT", "/hosts/{name}"),
    # Its own rule, so that an operator may keep retiring hosts to the admin (Nova's os-services
    # delete) while agents register themselves.
    _rule("berth:hosts:retire", "role:service or role:admin", "DELETE", "/hosts/{name}"),
    _rule("berth:hosts:manage", ADMIN, "GET", "/hosts"),
    _rule("berth:operations:index", ANY_READER, "GET", "/operations", ANYONE),
    # The operations of every project's servers, or of another project's (a project's readers see their own).
    _rule("berth:operations:index:all_projects", ADMIN, "GET", "/operations?all_projects=1"),
    _rule("berth:operations:show", READER, "GET", "/operations/{id}", LEGACY_OWNER),
    _rule("berth:metrics", "role:admin or role:service", "GET", "/metrics"),
]
