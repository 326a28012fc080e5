"""A server group as the scheduler takes it: a policy and the instances that are its members.

The hard policies are filters (``affinity``: every member on one host; ``anti-affinity``: at most
``max_server_per_host`` members on a host, 1 unless the group's rule says more); the soft ones are
weighers (``soft-affinity`` prefers the hosts holding members, ``soft-anti-affinity`` the hosts
holding fewest). Where the members are is read from Placement: the hosts their allocations are on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from berth.scheduler.errors import SpecError

GroupPolicyName = Literal["affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity"]
SERVER_GROUP_POLICIES: Final[tuple[GroupPolicyName, ...]] = (
    "affinity",
    "anti-affinity",
    "soft-affinity",
    "soft-anti-affinity",
)


@dataclass(frozen=True)
class ServerGroup:
    uuid: str
    policy: GroupPolicyName
    # The instances in the group, those being scheduled included or not: either way, an instance
    # counts on a host once it holds allocations there.
    members: frozenset[str] = frozenset()
    # The anti-affinity rule: how many members one host may hold.
    max_server_per_host: int = 1

    def __post_init__(self) -> None:
        if self.policy not in SERVER_GROUP_POLICIES:
            raise SpecError("server_group", f"policy {self.policy!r} is not one of {', '.join(SERVER_GROUP_POLICIES)}")
        if self.max_server_per_host < 1:
            raise SpecError("server_group", "max_server_per_host is at least 1")
        if self.max_server_per_host != 1 and self.policy != "anti-affinity":
            raise SpecError("server_group", "max_server_per_host is a rule of the anti-affinity policy only")
