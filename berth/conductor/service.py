"""What the conductor asks of the service itself: claim leases (docs/leases.md), an instance's
allocations written, read or removed, and which host holds them. Every call can be repeated."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Final
from urllib.parse import urlencode

from berth.clients.errors import LeaseExpired, PlacementError
from berth.clients.placement import PlacementClient
from berth.domain.host.allocations import Allocations
from berth.scheduler.hosts.candidates import AllocationRequest
from berth.scheduler.service import COMPUTE_NODE_TRAIT, INSTANCE_CONSUMER_TYPE, Service

LOG = logging.getLogger(__name__)

LEASES_PATH: Final = "/berth/leases"

__all__ = ["LeaseExpired", "ServiceCalls"]


class ServiceCalls:
    def __init__(self, placement: PlacementClient):
        self.placement = placement
        self.service = Service(placement)
        # Provider uuid -> the name of the compute host whose tree it is in. It does not change: an
        # agent names every provider of its host after the host, and derives the uuid from the name.
        self._host_names: dict[str, str] = {}
        # Providers found in no compute node's tree: sharing providers, for the most part.
        self._nobodys: set[str] = set()

    # -- leases -----------------------------------------------------------------------------------

    def take_lease(self, consumer: str, seconds: int) -> None:
        """Created, or moved to expire ``seconds`` from now. The conductor takes a lease only before
        it writes the allocations the lease is to cover (a build's first claim, an alternate's): a
        lease that expired meanwhile was released by the service with whatever it covered, which
        that write replaces anyway, so a new lease is taken in its place."""
        path = f"{LEASES_PATH}/{consumer}"
        try:
            self.placement.request("PUT", path, {"expires_in": seconds})
        except LeaseExpired:
            LOG.info("the lease of %s had expired and was released; taking a new one", consumer)
            self.placement.request("PUT", path, {"expires_in": seconds})

    def confirm_lease(self, consumer: str) -> None:
        """The allocations stay for good. A lease confirmed already, whose allocations stand, is
        fine; one that expired raises ``LeaseExpired``: the service refused the confirmation and
        released the allocations (409), or had released them already (404)."""
        path = f"{LEASES_PATH}/{consumer}/confirm"
        try:
            self.placement.request("POST", path)
        except LeaseExpired:
            raise
        except PlacementError as e:
            if e.status == 404:
                raise LeaseExpired(e.status, e.code, e.detail, "POST", path) from None
            raise

    def release_lease(self, consumer: str) -> None:
        """The lease and, if it was still leased, the consumer's allocations are gone."""
        try:
            self.placement.request("DELETE", f"{LEASES_PATH}/{consumer}")
        except PlacementError as e:
            if e.status != 404:
                raise

    # -- allocations ------------------------------------------------------------------------------

    def allocations(self, consumer: str) -> Allocations:
        return self.placement.consumer(consumer).allocations

    def release(self, consumer: str) -> None:
        self.service.release(consumer)

    def write(
        self, consumer: str, request: AllocationRequest, *, project_id: str, user_id: str
    ) -> PlacementError | None:
        """The consumer holds exactly ``request`` (whatever it held before); the service's refusal
        (409: no room) is returned."""
        state = self.placement.consumer(consumer)
        body = {
            "allocations": {rp: {"resources": dict(res)} for rp, res in request.allocations.items()},
            "consumer_generation": state.generation,
            "project_id": project_id,
            "user_id": user_id,
            "consumer_type": INSTANCE_CONSUMER_TYPE,
        }
        try:
            self.placement.request("PUT", f"/allocations/{consumer}", body)
        except PlacementError as e:
            if e.status != 409:
                raise
            return e
        return None

    def learn_hosts(self, compute_nodes: Mapping[str, str]) -> None:
        """Compute nodes' uuids and names as read elsewhere (the conductors' list of every compute
        node), so that ``host_of`` finds a consumer on a root it has not met without a read."""
        self._host_names.update(compute_nodes)
        self._nobodys.difference_update(compute_nodes)

    def host_of(self, consumer: str) -> str | None:
        """The name of the compute host whose tree holds the consumer's allocations, if any (a
        sharing provider is nobody's host; a consumer's other providers are all in one host's tree):
        a provider whose host is known, else the first, in uuid order, whose root is a compute node.
        One read of the consumer's allocations, and one per provider not met before."""
        held = sorted(self.allocations(consumer))
        for provider in held:
            if provider in self._host_names:
                return self._host_names[provider]
        known_nobodys = []
        for provider in held:
            if provider in self._nobodys:
                known_nobodys.append(provider)
                continue
            host = self._host_names.get(provider) or self._read_host_of(provider)
            if host is not None:
                return host
        # Before answering nobody, what was known of the others is read again: one of them may have
        # become a compute node's since (a host registering writes its tree, then its traits).
        for provider in known_nobodys:
            host = self._read_host_of(provider)
            if host is not None:
                return host
        return None

    def _read_host_of(self, provider: str) -> str | None:
        """The name of the compute node at the root of ``provider``'s tree (kept for the provider and
        the root); None for a provider in no compute node's tree, or no provider at all."""
        query = urlencode({"in_tree": provider, "required": COMPUTE_NODE_TRAIT})
        found = self.placement.get(f"/resource_providers?{query}")["resource_providers"]
        roots = [p for p in found if p["uuid"] == p.get("root_provider_uuid", p["uuid"])]
        if not roots:
            self._nobodys.add(provider)
            return None
        name = str(roots[0]["name"])
        self._nobodys.discard(provider)
        self._host_names[provider] = self._host_names[str(roots[0]["uuid"])] = name
        return name
