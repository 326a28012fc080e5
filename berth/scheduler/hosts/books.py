"""The providers' capacity and usage during one scheduling call, with what the call has taken.

Placement's provider summaries are read once per call; every instance the call places adds its
allocation request here, so that the next instance is weighed, and its requests checked, against
what is left (one sharing provider's disk is one book for all the hosts it lends to).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

from berth.scheduler.hosts.candidates import AllocationRequest, ProviderSummary


class ProviderBooks:
    def __init__(self, summaries: Mapping[str, ProviderSummary]):
        self.summaries = summaries
        self.taken: defaultdict[str, Counter[str]] = defaultdict(Counter)

    def capacity(self, provider: str, resource_class: str) -> int:
        summary = self.summaries.get(provider)
        entry = summary.resources.get(resource_class) if summary else None
        return entry.capacity if entry else 0

    def used(self, provider: str, resource_class: str) -> int:
        summary = self.summaries.get(provider)
        entry = summary.resources.get(resource_class) if summary else None
        return (entry.used if entry else 0) + self.taken[provider][resource_class]

    def free(self, provider: str, resource_class: str) -> int:
        return self.capacity(provider, resource_class) - self.used(provider, resource_class)

    def free_in(self, providers: Iterable[str], resource_class: str) -> int:
        return sum(self.free(rp, resource_class) for rp in providers)

    def capacity_in(self, providers: Iterable[str], resource_class: str) -> int:
        return sum(self.capacity(rp, resource_class) for rp in providers)

    def has_room(self, request: AllocationRequest) -> bool:
        """Whether every amount of the request still fits. Placement checked the units when it
        answered; what may have changed since is what this call took."""
        return all(
            self.free(rp, rc) >= amount
            for rp, resources in request.allocations.items()
            for rc, amount in resources.items()
        )

    def take(self, request: AllocationRequest) -> None:
        for rp, resources in request.allocations.items():
            self.taken[rp].update(resources)
