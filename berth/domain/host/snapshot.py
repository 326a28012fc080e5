"""A host as a scheduler sees it: its provider tree and what its claims use, in one document.

A compute agent serves its ``HostSnapshot`` (``GET /host``); a scheduler reads it and asks ``fits``,
which runs the very ``plan_claim`` the agent's claim runs, on the same data, so that a host chosen
this way rarely refuses the build. ``revision`` is a digest of the tree, the usage and the shared
provider: two snapshots with the same revision describe the same host in the same state, and a
different one means something changed in between. ``taken_at`` (seconds since the epoch) says when.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from berth.domain.host.errors import DoesNotFit, InvalidSnapshot
from berth.domain.host.fitting import Plan, plan_claim
from berth.domain.host.request import Flavor
from berth.domain.host.tree import ProviderTree
from berth.domain.host.usage import HostUsage


@dataclass(frozen=True)
class HostSnapshot:
    host: str
    tree: ProviderTree
    usage: HostUsage
    shared_provider: str | None  # the sharing provider new claims put their disk on, if any
    revision: str
    taken_at: float

    @classmethod
    def take(
        cls, host: str, tree: ProviderTree, usage: HostUsage, *, shared_provider: str | None, taken_at: float
    ) -> HostSnapshot:
        """A snapshot of this state, its revision computed from it."""
        content = _content(host, tree, usage, shared_provider)
        digest = hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
        return cls(host, tree, usage, shared_provider, digest[:32], taken_at)

    def to_dict(self) -> dict[str, Any]:
        return {
            **_content(self.host, self.tree, self.usage, self.shared_provider),
            "revision": self.revision,
            "taken_at": self.taken_at,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HostSnapshot:
        try:
            return cls(
                host=str(d["host"]),
                tree=ProviderTree.from_dict(d["providers"]),
                usage=HostUsage.from_dict(d["usage"]),
                shared_provider=None if d.get("shared_provider") is None else str(d["shared_provider"]),
                revision=str(d["revision"]),
                taken_at=float(d["taken_at"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InvalidSnapshot(f"invalid host snapshot: {e!r}") from None


def _content(host: str, tree: ProviderTree, usage: HostUsage, shared_provider: str | None) -> dict[str, Any]:
    return {
        "host": host,
        "providers": tree.to_dict(),
        "usage": usage.to_dict(),
        "shared_provider": shared_provider,
    }


@dataclass(frozen=True)
class Refusal:
    """Why a flavor does not fit a host: every shortage found."""

    reasons: tuple[str, ...]


def fits(snapshot: HostSnapshot, flavor: Flavor) -> Plan | Refusal:
    """What the host's agent would give ``flavor`` now, or why it would refuse it.

    A malformed flavor raises ``InvalidHostRequest``: no host would take it.
    """
    try:
        return plan_claim(flavor, snapshot.tree, snapshot.usage, shared_provider=snapshot.shared_provider)
    except DoesNotFit as e:
        return Refusal(tuple(e.reasons))
