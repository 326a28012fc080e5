"""What a host's tracker offers the modules that do its longer steps for it: the audit
(``audit``, ``audit_books``), the clean-up after evacuations (``evacuation``) and the move claims
(``move_claims``).

``ResourceTracker`` (``berth.tracker.tracker``) calls those modules and passes itself; they name it
by this interface, so that they import nothing above them and the tracker imports them downward.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from berth.clients.placement import ConsumerState, PlacementClient
from berth.domain.host.allocations import ByConsumer
from berth.domain.host.claims import ClaimOwner
from berth.domain.host.fitting import Plan
from berth.domain.host.records import ClaimRecord
from berth.domain.host.request import Flavor, InstanceSpec
from berth.domain.host.tree import ProviderTree
from berth.domain.host.usage import HostUsage
from berth.tracker.configuration.config import TrackerConfig
from berth.tracker.consumer_writer import ConsumerWriter, DesiredFn
from berth.tracker.drivers.base import Driver
from berth.tracker.recovery import PendingOperations
from berth.tracker.store import ClaimStore


class HostParts(ClaimOwner, Protocol):
    """A host's tracker as its helper modules use it (and the owner of the claims they make); every
    call is made under its lock."""

    @property
    def host(self) -> str: ...

    @property
    def driver(self) -> Driver: ...

    @property
    def placement(self) -> PlacementClient: ...

    @property
    def config(self) -> TrackerConfig: ...

    @property
    def store(self) -> ClaimStore: ...

    @property
    def writer(self) -> ConsumerWriter: ...

    @property
    def operations(self) -> PendingOperations: ...

    @property
    def shared_provider(self) -> str | None: ...

    def sharing_providers(self) -> set[str]: ...

    def our_providers(self) -> set[str]: ...

    def require_tree(self) -> ProviderTree: ...

    def usage(self) -> HostUsage: ...

    def plan(self, flavor: Flavor) -> Plan: ...

    def check_group(self, instance: InstanceSpec) -> None: ...

    def land(
        self,
        record: ClaimRecord,
        consumers: list[str],
        desired: DesiredFn,
        known: Mapping[str, ConsumerState] | None = None,
    ) -> ClaimRecord: ...

    def placement_snapshot(self) -> ByConsumer: ...

    def recover(self) -> list[dict[str, str]]: ...

    def cleanup_evacuations(self, snapshot: ByConsumer | None = None) -> list[dict[str, str | None]]: ...
