"""The driver interface: what a host has, and the guests it runs.

A driver keeps no books. ``host_facts()`` is the hardware as it is now and ``guests()`` the guests the
hypervisor runs (``berth.tracker.facts``); the provider tree is built from the facts and the
configuration by ``berth.tracker.hosttree``, the same way for every driver.

The guest side follows the claim life cycle (docs/tracker.md); ``berth.tracker.guests`` checks the
claim before it calls the driver, so a driver is only asked to run a guest in a live claim:

- ``spawn(instance, claim)``: build, unshelve after offload, and the destination of a resize, cold
  migration or evacuation (an ``active`` or ``incoming`` claim);
- ``destroy(instance)``: delete, shelve offload, the source after a confirmed move, the destination
  after a reverted one; destroying a guest that is not there is not an error;
- ``accept_migration(instance, claim)`` on the destination (an ``incoming`` claim), then
  ``migrate_out(instance, destination_host)`` on the source (an ``outgoing`` claim): a live migration.

A driver that only discovers (``LinuxDriver``) keeps the defaults, which refuse with
``GuestNotSupported``.
"""

from __future__ import annotations

import abc
from typing import Any

from berth.domain.host.records import ClaimRecord
from berth.domain.host.tree import ProviderTree
from berth.tracker.configuration.config import TrackerConfig
from berth.tracker.configuration.provider_config import ProviderConfig
from berth.tracker.errors import GuestNotSupported
from berth.tracker.facts import Guest, HostFacts
from berth.tracker.hosttree import build_provider_tree


class Driver(abc.ABC):
    """The host-facing half of the tracker: discovery, and the guests' side where the driver has one."""

    name = "abstract"

    @abc.abstractmethod
    def host_facts(self) -> HostFacts:
        """The host's hardware as it is now."""

    @abc.abstractmethod
    def guests(self) -> dict[str, Guest]:
        """Every guest present on the host, by instance uuid."""

    def provider_tree(
        self, host: str, config: TrackerConfig, provider_config: ProviderConfig | None = None
    ) -> ProviderTree:
        """The host as a tree of resource providers (see ``berth.tracker.hosttree``)."""
        return build_provider_tree(host, self.host_facts(), config, provider_config)

    def keep_state_beside(self, store_path: str) -> None:
        """Where the tracker keeps its claims: a driver that keeps state of its own keeps it next to them.

        Called by the tracker when it opens its store; a driver that asks the hypervisor needs nothing.
        """
        return None

    # -- the guest side -------------------------------------------------------------------------

    def spawn(self, instance_uuid: str, claim: ClaimRecord) -> Guest:
        """Start the guest in ``claim`` (its NUMA cells, pinned CPUs and devices); raise ``SpawnFailed``."""
        raise self._unsupported("spawn guests")

    def destroy(self, instance_uuid: str) -> bool:
        """Remove the guest; False when it was not there."""
        raise self._unsupported("destroy guests")

    def accept_migration(self, instance_uuid: str, claim: ClaimRecord) -> Guest:
        """Destination of a live migration: the guest arrives and runs in ``claim``."""
        raise self._unsupported("accept a migrating guest")

    def migrate_out(self, instance_uuid: str, destination_host: str) -> bool:
        """Source of a live migration: the guest leaves for ``destination_host``; False when already gone."""
        raise self._unsupported("migrate guests")

    def set_faults(self, settings: dict[str, Any]) -> dict[str, Any]:
        """Make spawns fail on request (``berth.tracker.drivers.faults``); answer the settings now in force."""
        raise self._unsupported("inject faults")

    def plant_guest(self, guest: Guest) -> Guest:
        """A fault: ``guest`` appears on the host as if started outside the tracker, in no claim (an
        orphan, for the audit to find)."""
        raise self._unsupported("plant guests")

    def _unsupported(self, what: str) -> GuestNotSupported:
        return GuestNotSupported(f"the {self.name} driver cannot {what}: it only discovers guests")
