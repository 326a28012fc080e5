"""Access rules, enforced with oslo.policy under Placement's rule names.

The defaults are Placement's:

- secure RBAC (the default, as oslo.policy's ``[oslo_policy] enforce_new_defaults`` under which
  Placement runs): the admin and service roles may do everything but reshape, which is the
  service's alone; a reader of a project may read that project's usages;
- legacy (``--no-enforce-new-defaults``): the same, and the admin role may also reshape.

Every rule is project-scoped, so a system-scoped token is refused whatever its roles, as oslo.policy
does for Placement.  A policy file (YAML or JSON, oslo.policy's rule syntax) overrides any rule by
name, e.g. ``"placement:resource_providers:list": "role:reader"``.  The engine is berth.web.access.policy.
"""

from __future__ import annotations

from dataclasses import dataclass

from berth.web.access.policy import PolicyEnforcer, RuleDefinition


@dataclass(frozen=True)
class Operation:
    name: str
    method: str
    path: str
    reads: bool


_RP = "placement:resource_providers:"
OPERATIONS = [
    Operation(_RP + "list", "GET", "/resource_providers", True),
    Operation(_RP + "create", "POST", "/resource_providers", False),
    Operation(_RP + "show", "GET", "/resource_providers/{uuid}", True),
    Operation(_RP + "update", "PUT", "/resource_providers/{uuid}", False),
    Operation(_RP + "delete", "DELETE", "/resource_providers/{uuid}", False),
    Operation(_RP + "inventories:list", "GET", "/resource_providers/{uuid}/inventories", True),
    Operation(_RP + "inventories:create", "POST", "/resource_providers/{uuid}/inventories", False),
    Operation(_RP + "inventories:show", "GET", "/resource_providers/{uuid}/inventories/{resource_class}", True),
    Operation(_RP + "inventories:update", "PUT", "/resource_providers/{uuid}/inventories", False),
    Operation(_RP + "inventories:delete", "DELETE", "/resource_providers/{uuid}/inventories", False),
    Operation(_RP + "aggregates:list", "GET", "/resource_providers/{uuid}/aggregates", True),
    Operation(_RP + "aggregates:update", "PUT", "/resource_providers/{uuid}/aggregates", False),
    Operation(_RP + "usages", "GET", "/resource_providers/{uuid}/usages", True),
    Operation(_RP + "allocations:list", "GET", "/resource_providers/{uuid}/allocations", True),
    Operation(_RP + "traits:list", "GET", "/resource_providers/{uuid}/traits", True),
    Operation(_RP + "traits:update", "PUT", "/resource_providers/{uuid}/traits", False),
    Operation(_RP + "traits:delete", "DELETE", "/resource_providers/{uuid}/traits", False),
    Operation("placement:resource_classes:list", "GET", "/resource_classes", True),
    Operation("placement:resource_classes:create", "POST", "/resource_classes", False),
    Operation("placement:resource_classes:show", "GET", "/resource_classes/{name}", True),
    Operation("placement:resource_classes:update", "PUT", "/resource_classes/{name}", False),
    Operation("placement:resource_classes:delete", "DELETE", "/resource_classes/{name}", False),
    Operation("placement:traits:list", "GET", "/traits", True),
    Operation("placement:traits:show", "GET", "/traits/{name}", True),
    Operation("placement:traits:update", "PUT", "/traits/{name}", False),
    Operation("placement:traits:delete", "DELETE", "/traits/{name}", False),
    Operation("placement:allocations:list", "GET", "/allocations/{consumer_uuid}", True),
    Operation("placement:allocations:manage", "POST", "/allocations", False),
    Operation("placement:allocations:update", "PUT", "/allocations/{consumer_uuid}", False),
    Operation("placement:allocations:delete", "DELETE", "/allocations/{consumer_uuid}", False),
    Operation("placement:allocation_candidates:list", "GET", "/allocation_candidates", True),
    Operation("placement:reshaper:reshape", "POST", "/reshaper", False),
    Operation("placement:usages", "GET", "/usages", True),
    # Berth's claim leases, outside the Placement API, under the same defaults.
    Operation("berth:leases:list", "GET", "/berth/leases", True),
    Operation("berth:leases:show", "GET", "/berth/leases/{consumer_uuid}", True),
    Operation("berth:leases:update", "PUT", "/berth/leases/{consumer_uuid}", False),
    Operation("berth:leases:confirm", "POST", "/berth/leases/{consumer_uuid}/confirm", False),
    Operation("berth:leases:delete", "DELETE", "/berth/leases/{consumer_uuid}", False),
    # Pick and claim, Berth's own as well.
    Operation("berth:pick", "POST", "/berth/pick", False),
    # The consumers preempting picks removed, under the pick's defaults.
    Operation("berth:preemptions:list", "GET", "/berth/preemptions", True),
    Operation("berth:preemptions:show", "GET", "/berth/preemptions/{consumer_uuid}", True),
    # Quotas, Berth's own: an administrator's alone by default, under either set of defaults.
    Operation("berth:quotas:list", "GET", "/berth/quotas", True),
    Operation("berth:quotas:show", "GET", "/berth/quotas/{project_id}", True),
    Operation("berth:quotas:update", "PUT", "/berth/quotas/{project_id}", False),
    Operation("berth:quotas:delete", "DELETE", "/berth/quotas/{project_id}", False),
    # The metrics (berth serve --metrics guarded, the default).
    Operation("berth:metrics", "GET", "/metrics", True),
]

# Rules of Berth's own pages rather than operations of the API. The dashboard shows the whole cloud's
# books, so by default only an administrator reads it, under either set of defaults.
PAGE_RULES = {"berth:dashboard": "rule:admin_api"}

BASE_RULES = {
    "admin_api": "role:admin",
    "service_api": "role:service",
    "admin_or_service_api": "role:admin or role:service",
    "project_reader_api": "role:reader and project_id:%(project_id)s",
    "admin_or_project_reader_or_service_api": "role:admin or rule:project_reader_api or role:service",
}
_SPECIAL_DEFAULTS = {
    "placement:reshaper:reshape": "rule:service_api",
    "placement:usages": "rule:admin_or_project_reader_or_service_api",
}
# Operations only an administrator may do by default, under either set of defaults.
ADMIN_ONLY = frozenset(op.name for op in OPERATIONS if op.name.startswith("berth:quotas:"))


def default_rule(operation: Operation, enforce_new_defaults: bool) -> str:
    if operation.name in ADMIN_ONLY:
        return "rule:admin_api"
    new = _SPECIAL_DEFAULTS.get(operation.name, "rule:admin_or_service_api")
    if enforce_new_defaults:
        return new
    # The legacy rule, role:admin, still grants what it granted before the new defaults.
    return f"{new} or rule:admin_api"


def rule_definitions() -> list[RuleDefinition]:
    """Placement's table of rules, in the order they are registered: the base rules, the operations,
    then the pages."""
    return (
        [RuleDefinition(name, check) for name, check in BASE_RULES.items()]
        + [
            RuleDefinition(
                op.name,
                default_rule(op, enforce_new_defaults=True),
                legacy_check=default_rule(op, enforce_new_defaults=False),
                method=op.method,
                path=op.path,
            )
            for op in OPERATIONS
        ]
        + [RuleDefinition(name, check) for name, check in PAGE_RULES.items()]
    )


def placement_policy(policy_file: str | None = None, enforce_new_defaults: bool = True) -> PolicyEnforcer:
    return PolicyEnforcer(rule_definitions(), policy_file, enforce_new_defaults)
