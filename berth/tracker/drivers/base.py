"""The driver interface: what a host has, whatever the books say.

A driver discovers; it keeps no books. ``host_facts()`` is the hardware as it is now and
``guests()`` the guests the hypervisor runs (``berth.tracker.facts``); the provider tree is built
from the facts and the configuration by ``berth.tracker.hosttree``, the same way for every driver.
"""

from __future__ import annotations

import abc

from berth.domain.host.tree import ProviderTree
from berth.tracker.config import TrackerConfig
from berth.tracker.facts import Guest, HostFacts
from berth.tracker.hosttree import build_provider_tree
from berth.tracker.provider_config import ProviderConfig


class Driver(abc.ABC):
    """The host-facing half of the tracker: discovery only, no bookkeeping."""

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
