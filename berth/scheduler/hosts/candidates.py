"""The answer of ``GET /allocation_candidates`` (microversion 1.39), typed for the scheduler.

Each allocation request is one way to place the instance: amounts per provider, and which
providers satisfied each request group (``mappings``). The provider summaries give every provider
of the trees involved: capacity and usage per resource class, traits, parent and root. A request
belongs to the host whose tree it takes from; a sharing provider (``MISC_SHARES_VIA_AGGREGATE``)
lends to several hosts and is nobody's host.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from berth.domain.host.allocations import Allocations, clean

SHARING_TRAIT: Final = "MISC_SHARES_VIA_AGGREGATE"


@dataclass(frozen=True)
class AllocationRequest:
    allocations: Allocations
    mappings: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def providers(self) -> frozenset[str]:
        return frozenset(self.allocations)

    def same_allocations(self, other: Mapping[str, Mapping[str, int]]) -> bool:
        return clean(self.allocations) == clean(other)

    def to_dict(self) -> dict[str, Any]:
        """As ``GET /allocation_candidates`` renders it, and as ``PUT /allocations`` takes it."""
        return {
            "allocations": {rp: {"resources": dict(res)} for rp, res in sorted(self.allocations.items())},
            "mappings": {suffix: list(rps) for suffix, rps in sorted(self.mappings.items())},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AllocationRequest:
        allocations = {
            str(rp): {str(rc): int(n) for rc, n in entry["resources"].items()} for rp, entry in d["allocations"].items()
        }
        mappings = {str(s): tuple(str(rp) for rp in rps) for s, rps in (d.get("mappings") or {}).items()}
        return cls(allocations, mappings)


@dataclass(frozen=True)
class ClassSummary:
    capacity: int
    used: int


@dataclass(frozen=True)
class ProviderSummary:
    uuid: str
    root_uuid: str
    parent_uuid: str | None
    resources: Mapping[str, ClassSummary]
    traits: frozenset[str]

    @property
    def shares(self) -> bool:
        return SHARING_TRAIT in self.traits

    @classmethod
    def from_dict(cls, uuid: str, d: Mapping[str, Any]) -> ProviderSummary:
        return cls(
            uuid=uuid,
            root_uuid=str(d.get("root_provider_uuid") or uuid),
            parent_uuid=None if d.get("parent_provider_uuid") is None else str(d["parent_provider_uuid"]),
            resources={str(rc): ClassSummary(int(v["capacity"]), int(v["used"])) for rc, v in d["resources"].items()},
            traits=frozenset(str(t) for t in d.get("traits") or ()),
        )


@dataclass(frozen=True)
class Candidates:
    requests: tuple[AllocationRequest, ...]
    summaries: Mapping[str, ProviderSummary]

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> Candidates:
        return cls(
            requests=tuple(AllocationRequest.from_dict(r) for r in body["allocation_requests"]),
            summaries={
                str(uuid): ProviderSummary.from_dict(str(uuid), s) for uuid, s in body["provider_summaries"].items()
            },
        )

    def hosts_of(self, request: AllocationRequest) -> list[str]:
        """The roots of the trees the request takes from, sharing providers left out."""
        roots: dict[str, None] = {}
        for rp in sorted(request.allocations):
            summary = self.summaries.get(rp)
            if summary is None or summary.shares:
                continue
            roots[summary.root_uuid] = None
        return list(roots)

    def by_host(self) -> dict[str, list[AllocationRequest]]:
        """Each host's allocation requests, hosts and requests in the order of the answer."""
        hosts: dict[str, list[AllocationRequest]] = {}
        for request in self.requests:
            for root in self.hosts_of(request):
                hosts.setdefault(root, []).append(request)
        return hosts

    def tree(self, root: str) -> list[ProviderSummary]:
        return [s for s in self.summaries.values() if s.root_uuid == root]
