"""An anti-affinity server group as the host's agent checks it when it claims.

The scheduler spreads a group's members (its filter, or the service's pick under the group's lock),
but its choice can be overtaken: a move gives up the scheduler's reservation on its destination
just before the destination claims (docs/conductor.md), and a member placed in that gap does not
see the one arriving. The agent's claim is the last word on what its host holds, and every claim
of a host runs under that host's lock, so the agent checks the group again there, against its
own claims: of two members that race for one host, whichever claims second is refused and goes
to its next alternate. This is the late check Nova's compute manager also makes.

A member counts on the host while it holds any claim there, in any state: shelved and
soft-deleted instances keep their place, and so does the source side of a move in flight, which a
revert brings back. The instance being claimed for never counts against itself (a resize on its
own host).

The members a request names are those its caller knew when the operation began; one that joined
the group since is unknown to it. So each claim also keeps the group it declared
(``ClaimRecord.anti_affinity_group``), and a claim counts as a member's when either says so: of
two members racing for a host, the second to claim knows the first one way or the other.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from berth.domain.host.errors import InvalidHostRequest


class HeldClaim(Protocol):
    """What the rule reads of a claim the host holds (``records.ClaimRecord`` is one): the records
    carry requests, which carry this rule, so the rule names only the two fields it needs."""

    @property
    def instance_uuid(self) -> str: ...

    @property
    def anti_affinity_group(self) -> str | None: ...


@dataclass(frozen=True)
class AntiAffinity:
    """The group ``uuid``: at most ``max_per_host`` of ``members`` on one host."""

    uuid: str
    members: frozenset[str]
    max_per_host: int = 1

    def refusal(self, instance_uuid: str, claims: Iterable[HeldClaim]) -> str | None:
        """Why the host holding ``claims`` cannot take ``instance_uuid`` too, or None."""
        here = sorted(
            {c.instance_uuid for c in claims if c.instance_uuid in self.members or c.anti_affinity_group == self.uuid}
            - {instance_uuid}
        )
        if len(here) < self.max_per_host:
            return None
        return (
            f"anti-affinity server group {self.uuid} allows {self.max_per_host} member(s) on a host "
            f"and this host holds {', '.join(here)}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {"uuid": self.uuid, "members": sorted(self.members), "max_per_host": self.max_per_host}

    @classmethod
    def from_dict(cls, d: Any) -> AntiAffinity:
        try:
            group = cls(
                str(uuidlib.UUID(d["uuid"])),
                frozenset(str(uuidlib.UUID(m)) for m in d.get("members") or ()),
                int(d.get("max_per_host", 1)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InvalidHostRequest(f"invalid anti_affinity: {e}") from None
        if group.max_per_host < 1:
            raise InvalidHostRequest("invalid anti_affinity: max_per_host is at least 1")
        return group
