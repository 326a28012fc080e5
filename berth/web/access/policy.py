"""The policy engine: oslo.policy over a service's table of rules, evaluated without reloads.

A service names its rules, each with its default check string under secure RBAC (oslo.policy's
``[oslo_policy] enforce_new_defaults``) and, where it differs, under the legacy defaults. Every rule
is project-scoped, so a system-scoped token is refused whatever its roles. A policy file (YAML or
JSON, oslo.policy's rule syntax) overrides any rule by name.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from oslo_config import cfg
from oslo_policy import policy as oslo_policy

from berth.domain.errors import Forbidden
from berth.web.access.auth import Caller
from berth.web.access.operator_files import read_yaml

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class RuleDefinition:
    """One rule's name and defaults; ``method`` and ``path`` name the operation it guards, if any
    (a base rule other rules refer to guards none)."""

    name: str
    check: str
    # The default without enforce_new_defaults; None: the same as ``check``.
    legacy_check: str | None = None
    description: str | None = None
    method: str | None = None
    path: str | None = None

    def default(self, enforce_new_defaults: bool) -> oslo_policy.RuleDefault:
        check = self.check if enforce_new_defaults or self.legacy_check is None else self.legacy_check
        description = self.description
        if description is None and self.method and self.path:
            description = f"{self.method} {self.path}"
        return oslo_policy.RuleDefault(self.name, check, scope_types=["project"], description=description)


class PolicyFileError(ValueError):
    """A policy file that cannot be read, or that does not map rule names to check strings."""


def read_policy_file(path: str) -> dict[str, str]:
    """The rules a policy file overrides; :class:`PolicyFileError` naming the file and what is wrong.

    oslo.policy itself skips a file it cannot find, and fails on a malformed one only when it loads
    it, in each worker, with a traceback.
    """
    # YAML, of which JSON is a subset, as oslo.policy reads it (parse_file_contents).
    rules = read_yaml(path, "the policy file", PolicyFileError, forms="YAML or JSON") or {}
    if not isinstance(rules, dict):
        raise PolicyFileError(
            f"the policy file {path} holds a {type(rules).__name__}, not a mapping of rule names to check "
            'strings (rule_name: "role:admin")'
        )
    for name, check in rules.items():
        if not isinstance(name, str) or not isinstance(check, str):
            raise PolicyFileError(
                f"the policy file {path}: the rule {name!r} maps to {check!r}; each rule maps to a check string "
                '(rule_name: "role:admin")'
            )
    return rules


def _warn_of_unknown_rules(path: str, rules: Mapping[str, str], definitions: Sequence[RuleDefinition]) -> None:
    """Log the rules of a policy file that are none of the service's and that no rule refers to
    (``rule:NAME``): a misspelt name, which oslo.policy keeps without a word and overrides nothing."""
    referred = {
        name
        for check in [*rules.values(), *(d.check for d in definitions)]
        for name in re.findall(r"rule:([^\s()]+)", check)
    }
    unknown = sorted(set(rules) - {d.name for d in definitions} - referred)
    if unknown:
        LOG.warning(
            "the policy file %s names rules this service does not have, which override nothing: %s",
            path,
            ", ".join(unknown),
        )


class PolicyEnforcer:
    def __init__(
        self, definitions: Sequence[RuleDefinition], policy_file: str | None = None, enforce_new_defaults: bool = True
    ):
        if policy_file:
            # Absolute: oslo.policy looks a relative name up only in configuration folders, which
            # ours has none of, and goes on without it. Read first, so a bad file is said plainly.
            policy_file = os.path.abspath(policy_file)
            _warn_of_unknown_rules(policy_file, read_policy_file(policy_file), definitions)
        conf = cfg.ConfigOpts()
        conf([], project="berth", default_config_files=[], default_config_dirs=[])
        self.enforcer = oslo_policy.Enforcer(conf, policy_file=policy_file, use_conf=False)
        self.enforcer.register_defaults([rule.default(enforce_new_defaults) for rule in definitions])
        self.enforcer.load_rules(force_reload=True)
        # Rules are evaluated directly, not through Enforcer.enforce (which looks for changes to the
        # policy file on every call), and each answer is remembered: it depends only on the rule,
        # the caller's roles and ids, and the target.
        rules = self.enforcer.rules

        @lru_cache(maxsize=4096)
        def decide(
            rule: str,
            roles: tuple[str, ...],
            user_id: str,
            project_id: str,
            target_items: tuple[tuple[str, str], ...],
        ) -> bool:
            credentials = {"user_id": user_id, "project_id": project_id, "roles": list(roles), "system_scope": None}
            return bool(rules[rule](dict(target_items), credentials, self.enforcer))

        self._decide = decide

    def authorize(self, caller: Caller | None, rule: str, target: Mapping[str, object] | None = None) -> None:
        if caller is None:
            raise _refusal(rule)  # no public path has a rule: nothing to grant an unknown caller
        target = target if target is not None else {"project_id": caller.project_id, "user_id": caller.user_id}
        # Every rule is project-scoped; a system-scoped token is refused before any rule is read.
        allowed = caller.system_scope is None and self._decide(
            rule,
            tuple(sorted(caller.roles)),
            caller.user_id,
            caller.project_id,
            tuple(sorted((k, str(v)) for k, v in target.items())),
        )
        if not allowed:
            raise _refusal(rule)


def _refusal(rule: str) -> Forbidden:
    # Worded as Placement words its PolicyNotAuthorized; clients print the detail as it is.
    return Forbidden(f"Policy does not allow {rule} to be performed.")
