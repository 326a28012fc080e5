"""A candidate host as the filters and weighers see it during one scheduling call.

A host is a root provider of the candidates answer. Its state holds that host's allocation
requests (in the answer's order), its tree's capacity and usage (``ProviderBooks``, shared by all
hosts of the call), its root's traits and aggregates, the instances on it (read only when a
weigher counts them), the members of the request's server group on it, and, when a filter asks,
its agent's snapshot (read once per call) on which ``fit`` runs the agent's own claim code.
``consume`` counts an instance placed on it, as Nova's host state consumes a request.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass, field

from berth.domain.capacity import Inventory
from berth.domain.host.fitting import Plan
from berth.domain.host.request import Flavor
from berth.domain.host.snapshot import HostSnapshot, Refusal, fits
from berth.domain.host.usage import HostUsage
from berth.domain.weighing import HostFacts, host_facts
from berth.scheduler.hosts.books import ProviderBooks
from berth.scheduler.hosts.candidates import AllocationRequest
from berth.scheduler.hosts.snapshots import SnapshotSource

_WEIGHED_CLASSES = ("VCPU", "PCPU", "MEMORY_MB", "DISK_GB")


@dataclass(eq=False)  # a host is itself: two states are never the same host twice in one call
class HostState:
    uuid: str  # the root provider
    name: str
    requests: list[AllocationRequest]
    tree: tuple[str, ...]  # the host's providers in the answer's summaries
    traits: frozenset[str]  # the root provider's
    aggregates: frozenset[str]  # the root provider's, among those the settings name
    books: ProviderBooks
    snapshots: SnapshotSource
    instances: set[str] | None = None  # consumers on the host; None when nothing counts them
    group_members: set[str] = field(default_factory=set)
    # What this call placed here since the agent's snapshot was taken.
    placed: list[Plan] = field(default_factory=list, init=False)
    # fits() answers by request (its JSON form: a flavor is not hashable), until the host changes.
    _fitted: dict[str, Plan | Refusal | str] = field(default_factory=dict, init=False)

    def __str__(self) -> str:
        return self.name

    # -- what Placement says ----------------------------------------------------------------------

    def open_requests(self) -> Iterator[AllocationRequest]:
        """The host's allocation requests that still fit what this call has left of it."""
        return (request for request in self.requests if self.books.has_room(request))

    def sharing_providers(self) -> frozenset[str]:
        """The providers outside the tree that the host's requests take from (shared storage)."""
        own = set(self.tree)
        return frozenset(rp for request in self.requests for rp in request.allocations if rp not in own)

    def free(self, resource_class: str) -> int:
        return self.books.free_in(self.tree, resource_class)

    def facts(self) -> HostFacts:
        """What the weighers read: the free amounts the books give, with a sharing provider's disk
        counted as the host's own, as each host on a shared storage reports it."""
        counted = [
            (rc, Inventory(total=self.books.capacity(rp, rc)), self.books.used(rp, rc))
            for rp in self.tree
            for rc in _WEIGHED_CLASSES
        ]
        counted += [
            ("DISK_GB", Inventory(total=self.books.capacity(rp, "DISK_GB")), self.books.used(rp, "DISK_GB"))
            for rp in sorted(self.sharing_providers())
        ]
        instances = len(self.instances) if self.instances is not None else 0
        return host_facts(counted, instances=instances, group_members=len(self.group_members))

    # -- what the agent says ------------------------------------------------------------------------

    def snapshot(self) -> HostSnapshot | str:
        """The agent's snapshot with what this call placed here since, or why there is none."""
        taken = self.snapshots.snapshot(self.name, self.uuid)
        if isinstance(taken, str) or not self.placed:
            return taken
        usage = HostUsage.from_dict(taken.usage.to_dict())
        for index, plan in enumerate(self.placed):
            usage.add({**plan.allocations, **plan.shared}, plan.numa, plan.pci, f"scheduled-{index}")
        return dataclasses.replace(taken, usage=usage)

    def fit(self, flavor: Flavor) -> Plan | Refusal | str:
        """What the agent's claim would give ``flavor`` here now: a plan, its refusal, or why the
        agent could not be asked."""
        key = json.dumps(flavor.to_dict(), sort_keys=True)
        if key not in self._fitted:
            snapshot = self.snapshot()
            self._fitted[key] = snapshot if isinstance(snapshot, str) else fits(snapshot, flavor)
        return self._fitted[key]

    # -- placing an instance here --------------------------------------------------------------------

    def consume(self, request: AllocationRequest, instance_uuid: str, plan: Plan | None, *, member: bool) -> None:
        """Count an instance placed here with ``request``: the books, the instances, the group
        members and, when the agent was asked, the plan its claim will follow."""
        self.books.take(request)
        if self.instances is not None:
            self.instances.add(instance_uuid)
        if member:
            self.group_members.add(instance_uuid)
        if plan is not None:
            self.placed.append(plan)
        self._fitted.clear()

    def forget(self, request: AllocationRequest) -> None:
        """Drop a request the service refused: it is not tried again in this call."""
        self.requests = [r for r in self.requests if r is not request]
