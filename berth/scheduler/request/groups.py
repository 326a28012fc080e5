"""Request groups as the extra specs build them, before they are frozen into a request spec.

``resources[<suffix>]:<CLASS>=<amount>`` and ``trait[<suffix>]:<NAME>=required|forbidden`` fill
the group of that suffix (none: the unsuffixed group); the suffix is 1 to 64 letters, digits, ``_``
or ``-``, as Placement's granular groups (1.33) take them. Every key is checked as it is read, so a
bad one is named in the error.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from berth.scheduler.errors import SpecError
from berth.scheduler.request.flavor import Flavor
from berth.scheduler.request.names import check_resource_class, check_trait

GroupPolicy = Literal["none", "isolate"]
GROUP_POLICIES: Final[tuple[GroupPolicy, ...]] = ("none", "isolate")

GRANULAR_KEY: Final = re.compile(r"^(resources|trait)([a-zA-Z0-9_-]{1,64})?:(.*)$")
TRAIT_VALUES: Final = ("required", "forbidden")


@dataclass
class GroupDraft:
    suffix: str
    resources: dict[str, int] = field(default_factory=dict)
    required: set[str] = field(default_factory=set)
    forbidden: set[str] = field(default_factory=set)
    # The key that asked for each resource class and trait, to name it in later errors.
    keys: dict[str, str] = field(default_factory=dict)
    pci_request: int | None = None

    def add_resource(self, resource_class: str, amount: int, key: str) -> None:
        self.resources[resource_class] = amount
        self.keys.setdefault(resource_class, key)

    def add_trait(self, name: str, value: str, key: str) -> None:
        """Require or forbid ``name``; doing both in one group is refused."""
        if value not in TRAIT_VALUES:
            raise SpecError(key, f"{value!r} is neither 'required' nor 'forbidden'")
        mine, other = (self.required, self.forbidden) if value == "required" else (self.forbidden, self.required)
        if name in other:
            raise SpecError(key, f"{name} is both required and forbidden (also by {self.keys.get(name, key)})")
        mine.add(name)
        self.keys.setdefault(name, key)

    def strip_zeros(self) -> None:
        self.resources = {rc: n for rc, n in self.resources.items() if n}

    def is_empty(self) -> bool:
        return not (self.resources or self.required or self.forbidden)


class Groups:
    """The drafts by suffix, the unsuffixed one ("") first."""

    def __init__(self) -> None:
        self.by_suffix: dict[str, GroupDraft] = {"": GroupDraft("")}

    @property
    def unsuffixed(self) -> GroupDraft:
        return self.by_suffix[""]

    def group(self, suffix: str) -> GroupDraft:
        return self.by_suffix.setdefault(suffix, GroupDraft(suffix))

    def __iter__(self) -> Iterator[GroupDraft]:
        return iter(list(self.by_suffix.values()))

    def suffixed(self) -> list[GroupDraft]:
        return [g for s, g in self.by_suffix.items() if s]

    def merged_resources(self) -> Counter[str]:
        """Each class's amount summed over every group."""
        total: Counter[str] = Counter()
        for group in self.by_suffix.values():
            total.update(group.resources)
        return total

    def key_of(self, resource_class: str) -> str | None:
        """The first key that asked for the class, in any group."""
        return next((g.keys[resource_class] for g in self.by_suffix.values() if resource_class in g.keys), None)

    def strip_zeros(self) -> None:
        """Amounts of 0 remove their class; a suffixed group left with nothing goes."""
        for group in self.by_suffix.values():
            group.strip_zeros()
        self.by_suffix = {s: g for s, g in self.by_suffix.items() if not s or not g.is_empty()}


def parse_granular(extra_specs: Mapping[str, str]) -> Groups:
    groups = Groups()
    for key, value in extra_specs.items():
        if not key.startswith(("resources", "trait")):
            continue
        match = GRANULAR_KEY.match(key)
        if match is None:
            if ":" in key:
                raise SpecError(key, "a group suffix is 1 to 64 letters, digits, '_' or '-'")
            continue
        prefix, suffix, name = match.groups()
        group = groups.group(suffix or "")
        if prefix == "resources":
            group.add_resource(check_resource_class(name, key), _amount(value, key), key)
        else:
            group.add_trait(check_trait(name, key), value, key)
    return groups


def _amount(value: str, key: str) -> int:
    try:
        amount = int(value)
    except (TypeError, ValueError):
        raise SpecError(key, f"{value!r} is not a whole number") from None
    if amount < 0:
        raise SpecError(key, f"{amount} is negative")
    return amount


def parse_group_policy(extra_specs: Mapping[str, str]) -> GroupPolicy | None:
    value = extra_specs.get("group_policy")
    if value is None:
        return None
    for policy in GROUP_POLICIES:
        if value == policy:
            return policy
    raise SpecError("group_policy", f"{value!r} is neither 'none' nor 'isolate'")


def add_flavor_resources(groups: Groups, flavor: Flavor) -> None:
    """The flavor's own CPUs, memory and disk, in the unsuffixed group, for each class no extra spec
    (or CPU policy) names in any group, not even with 0. The disk is the root and ephemeral disks
    plus the swap rounded up to whole GiB."""
    asked = groups.merged_resources()
    unsuffixed = groups.unsuffixed
    if "VCPU" not in asked and "PCPU" not in asked:
        unsuffixed.add_resource("VCPU", flavor.vcpus, "vcpus")
    if "MEMORY_MB" not in asked:
        unsuffixed.add_resource("MEMORY_MB", flavor.memory_mb, "memory_mb")
    if "DISK_GB" not in asked:
        disk = flavor.root_gb + flavor.ephemeral_gb + -(-flavor.swap_mb // 1024)
        if disk:
            unsuffixed.add_resource("DISK_GB", disk, "root_gb")


def aggregate_extra_specs(extra_specs: Mapping[str, str]) -> dict[str, str]:
    """``aggregate_instance_extra_specs:<key>`` -> value, for the scheduler's aggregate filter."""
    prefix = "aggregate_instance_extra_specs:"
    found = {}
    for key, value in extra_specs.items():
        if key.startswith(prefix):
            name = key[len(prefix) :]
            if not name:
                raise SpecError(key, "names no aggregate metadata key")
            found[name] = value
    return found
