"""What ``select_destinations`` answers: per instance, the host claimed for it and alternates.

The claimed destination's allocation request is written in Placement for the instance already;
the alternates' are not: a conductor whose build fails on the claimed host claims an alternate's
allocation request itself (``PUT /allocations/{instance}``) and tries that host, without asking
the scheduler again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from berth.scheduler.hosts.candidates import AllocationRequest
from berth.scheduler.request.request_spec import QUERY_MICROVERSION

ALLOCATION_REQUEST_VERSION: Final = QUERY_MICROVERSION


@dataclass(frozen=True)
class Destination:
    host: str  # the root provider's name: the host's agent is known by it
    root_provider_uuid: str
    allocation_request: AllocationRequest


@dataclass(frozen=True)
class Victim:
    """A consumer the service's pick removed to make room for the instance (docs/pick-and-claim.md,
    "Priorities and preemption"): its allocations are gone; its server, if it is one, still runs."""

    consumer_uuid: str
    priority: int
    root_provider_uuid: str


@dataclass(frozen=True)
class Selection:
    instance_uuid: str
    destination: Destination  # claimed
    alternates: tuple[Destination, ...] = ()
    # The microversion the allocation requests are written in.
    allocation_request_version: str = ALLOCATION_REQUEST_VERSION
    # The consumers the claim removed from the destination's tree (only a pick that preempted).
    preempted: tuple[Victim, ...] = ()

    @property
    def host(self) -> str:
        return self.destination.host
