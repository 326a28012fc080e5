"""What the conductor asks of the service itself: claim leases (docs/leases.md), an instance's
allocations written, read or removed, and which host holds them. Every call can be repeated."""

from __future__ import annotations

from typing import Final
from urllib.parse import urlencode

from berth.clients.errors import PlacementError
from berth.clients.placement import PlacementClient
from berth.domain.host.allocations import Allocations
from berth.scheduler.candidates import AllocationRequest
from berth.scheduler.service import COMPUTE_NODE_TRAIT, INSTANCE_CONSUMER_TYPE, Service

LEASES_PATH: Final = "/berth/leases"


class LeaseExpired(PlacementError):
    """The lease was gone when confirmed, and the allocations with it: the service released them."""


class ServiceCalls:
    def __init__(self, placement: PlacementClient):
        self.placement = placement
        self.service = Service(placement)

    # -- leases -----------------------------------------------------------------------------------

    def take_lease(self, consumer: str, seconds: int) -> None:
        """Created, or moved to expire ``seconds`` from now."""
        self.placement.request("PUT", f"{LEASES_PATH}/{consumer}", {"expires_in": seconds})

    def confirm_lease(self, consumer: str) -> None:
        """The allocations stay for good. A lease confirmed already, whose allocations stand, is
        fine; one that expired raises ``LeaseExpired``."""
        try:
            self.placement.request("POST", f"{LEASES_PATH}/{consumer}/confirm")
        except PlacementError as e:
            if e.status == 404:
                raise LeaseExpired(e.status, e.code, e.detail, "POST", f"{LEASES_PATH}/{consumer}/confirm") from None
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

    def host_of(self, consumer: str) -> str | None:
        """The name of the compute host whose tree holds the consumer's allocations, if any (a
        sharing provider is nobody's host)."""
        body = self.placement.get("/resource_providers?" + urlencode({"required": COMPUTE_NODE_TRAIT}))
        hosts = {str(p["uuid"]): str(p["name"]) for p in body["resource_providers"]}
        for provider in sorted(self.allocations(consumer)):
            root = self.service.root_of(provider)
            if root in hosts:
                return hosts[root]
        return None
