"""Access rules, enforced with oslo.policy under Placement's rule names.

Two sets of defaults exist, as in Placement:

- legacy (the default): every operation needs the admin role (``rule:admin_api``);
- secure RBAC (``--enforce-new-defaults``): the admin and service roles may do everything; a reader
  (system-scoped, or any reader for the read-only catalogue of classes and traits) may read; a project
  reader may read its own project's usages.

A policy file (YAML or JSON, oslo.policy's rule syntax) overrides any rule by name, e.g.
``"placement:resource_providers:list": "role:reader"``.
"""
from __future__ import annotations

from dataclasses import dataclass

from oslo_config import cfg
from oslo_policy import policy as oslo_policy

from berth.domain.errors import Forbidden


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
]

BASE_RULES = {
    "admin_api": "role:admin",
    "service_api": "role:service",
    "admin_or_service_api": "rule:admin_api or rule:service_api",
    "system_reader_api": "role:reader and system_scope:all",
    "project_reader_api": "role:reader and project_id:%(project_id)s",
}


def default_rule(operation: Operation, enforce_new_defaults: bool) -> str:
    if not enforce_new_defaults:
        return "rule:admin_api"
    if not operation.reads:
        return "rule:admin_or_service_api"
    if operation.name == "placement:usages":
        return "rule:admin_or_service_api or rule:system_reader_api or rule:project_reader_api"
    if operation.name.startswith(("placement:resource_classes:", "placement:traits:")):
        # The catalogue of names holds nothing about anyone's resources.
        return "rule:admin_or_service_api or role:reader"
    return "rule:admin_or_service_api or rule:system_reader_api"


class PolicyEnforcer:
    def __init__(self, policy_file: str | None = None, enforce_new_defaults: bool = False):
        conf = cfg.ConfigOpts()
        conf([], project="berth", default_config_files=[], default_config_dirs=[])
        self.enforcer = oslo_policy.Enforcer(conf, policy_file=policy_file, use_conf=False)
        self.enforcer.register_defaults(
            [oslo_policy.RuleDefault(name, check) for name, check in BASE_RULES.items()]
            + [oslo_policy.RuleDefault(op.name, default_rule(op, enforce_new_defaults), description=
                                       f"{op.method} {op.path}") for op in OPERATIONS]
        )
        self.enforcer.load_rules(force_reload=True)

    def authorize(self, caller, rule: str, target: dict | None = None) -> None:
        target = target if target is not None else {"project_id": caller.project_id, "user_id": caller.user_id}
        credentials = {
            "user_id": caller.user_id,
            "project_id": caller.project_id,
            "roles": caller.roles,
            "system_scope": caller.system_scope,
        }
        if not self.enforcer.enforce(rule, target, credentials):
            raise Forbidden(f"Policy does not allow {rule} to be performed.")
