"""What the conductors change in the service for a host: its availability zone's aggregate and the
``COMPUTE_STATUS_DISABLED`` trait of its compute node (as Nova's compute service sets it when an
operator disables the service), and the zones as the scheduler reads them.

A zone's aggregate is named by the zone alone (a UUID derived from its name), so every conductor
finds the same one without agreeing on it first."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Final
from urllib.parse import urlencode

import sqlalchemy as sa

from berth.clients.errors import ClientError
from berth.clients.placement import PlacementClient, retry_on_conflict
from berth.conductor.records.hosts import Hosts
from berth.scheduler.request.request_spec import DISABLED_TRAIT
from berth.scheduler.service import COMPUTE_NODE_TRAIT

LOG = logging.getLogger(__name__)

# The namespace of the zones' aggregates (uuid5 of the zone's name).
ZONE_NAMESPACE: Final = uuid.UUID("6f0c2f4e-5b7a-4c8e-9d61-3a0f6f9b2e41")
# How long the list of zones is used before it is read again.
FRESH_SECONDS: Final = 5.0
# How long the hosts that are down are known before they are read again: a host down is left out of
# the scheduling within this long of the conductors seeing it so.
DOWN_FRESH_SECONDS: Final = 1.0
# How long the service's compute nodes are known before they are read again: a node that no agent
# registered is left out of the scheduling within this long of its first report (a read of every
# compute node, so not every second).
COMPUTE_NODES_FRESH_SECONDS: Final = 15.0


def zone_aggregate(zone: str) -> str:
    return str(uuid.uuid5(ZONE_NAMESPACE, zone))


class HostNotReported(Exception):
    """The host's agent has not yet written its compute node to the service."""


def _root(placement: PlacementClient, host: str) -> str:
    found = placement.find_provider(host)
    if found is None:
        raise HostNotReported(f"host {host} has no provider in the service yet")
    return str(found["uuid"])


def join_zone(placement: PlacementClient, host: str, zone: str | None, every_zone: Collection[str]) -> None:
    """The host's compute node in its zone's aggregate, and in no other zone's of ``every_zone``
    (the aggregates that are not zones', its agent's or an operator's, are kept)."""
    root = _root(placement, host)
    others = {zone_aggregate(z) for z in every_zone}

    def attempt() -> int:
        generation, current = placement.get_aggregates(root)
        zones = current & others
        wanted = (current - zones) | ({zone_aggregate(zone)} if zone else set())
        return generation if wanted == current else placement.set_aggregates(root, generation, wanted)

    retry_on_conflict(attempt, what=f"aggregates of {host}")


def set_disabled(placement: PlacementClient, host: str, disabled: bool) -> None:
    root = _root(placement, host)

    def attempt() -> int:
        generation, current = placement.get_traits(root)
        wanted = current | {DISABLED_TRAIT} if disabled else current - {DISABLED_TRAIT}
        return generation if wanted == current else placement.set_traits(root, generation, wanted)

    retry_on_conflict(attempt, what=f"traits of {host}")


@contextlib.contextmanager
def _keeping_what_was_known(what: str) -> Iterator[None]:
    """A read that fails (the database failing over, the service not answering) leaves what was
    known before, read again at the next look: the scheduler goes on meanwhile rather than the
    operation failing."""
    try:
        yield
    except sa.exc.DBAPIError as error:
        LOG.warning("%s could not be read again (%s); what was known stays", what, error.orig)
    except ClientError as error:
        LOG.warning("%s could not be read again (%s); what was known stays", what, error)


class _ReadAgain(Collection[str]):
    """A set of host names read again when it is asked after it went stale (``_current``)."""

    def _current(self) -> frozenset[str]:
        raise NotImplementedError

    def __contains__(self, name: object) -> bool:
        return name in self._current()

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())


class DownHosts(_ReadAgain):
    """The registered hosts that are down now, as ``SchedulerConfig.hosts_down`` (read again every
    second)."""

    def __init__(self, hosts: Hosts):
        self.hosts = hosts
        self._lock = threading.Lock()
        self._read_at = -DOWN_FRESH_SECONDS
        self._down: frozenset[str] = frozenset()

    def _current(self) -> frozenset[str]:
        now = time.monotonic()
        with self._lock:
            if now - self._read_at >= DOWN_FRESH_SECONDS:
                with _keeping_what_was_known("the hosts that are down"):
                    self._down = self.hosts.down()
                    self._read_at = now
            return self._down


class UnknownHosts(_ReadAgain):
    """The service's compute nodes that no agent has registered, as ``SchedulerConfig.unknown_hosts``:
    no conductor could ask their agent for anything (as Nova's scheduler knows only the compute
    nodes of its compute services). The registered hosts are read again every second, so that a
    host is scheduled to as soon as it registers; the service's compute nodes every
    ``COMPUTE_NODES_FRESH_SECONDS`` (a read of every one of them)."""

    def __init__(self, hosts: Hosts, placement: PlacementClient):
        self.hosts = hosts
        self.placement = placement
        self._lock = threading.Lock()
        self._read_at = -DOWN_FRESH_SECONDS
        self._nodes_read_at = -COMPUTE_NODES_FRESH_SECONDS
        self._nodes: frozenset[str] = frozenset()
        self._registered: frozenset[str] = frozenset()
        # The difference, made again only after a read: the scheduler asks it of every candidate host
        # (a difference of two sets of every host each time).
        self._unknown: frozenset[str] = frozenset()
        # Told each read of the compute nodes (uuid -> name): what else would read them again.
        self.on_nodes: Callable[[Mapping[str, str]], None] = lambda nodes: None

    def _current(self) -> frozenset[str]:
        now = time.monotonic()
        with self._lock:
            read = False
            if now - self._nodes_read_at >= COMPUTE_NODES_FRESH_SECONDS:
                with _keeping_what_was_known("the service's compute nodes"):
                    nodes = _compute_nodes(self.placement)
                    self._nodes = frozenset(nodes.values())
                    self._nodes_read_at = now
                    read = True
                    self.on_nodes(nodes)
            if now - self._read_at >= DOWN_FRESH_SECONDS:
                with _keeping_what_was_known("the registered hosts"):
                    self._registered = self.hosts.names()
                    self._read_at = now
                    read = True
            if read:
                self._unknown = self._nodes - self._registered
            return self._unknown


def _compute_nodes(placement: PlacementClient) -> dict[str, str]:
    """Every compute node's uuid -> its name."""
    query = urlencode({"required": COMPUTE_NODE_TRAIT})
    return {str(p["uuid"]): str(p["name"]) for p in placement.get(f"/resource_providers?{query}")["resource_providers"]}


class ZoneAggregates(Mapping[str, frozenset[str]]):
    """Each zone some registered host is in -> its aggregate, as ``SchedulerConfig.availability_zones``."""

    def __init__(self, hosts: Hosts):
        self.hosts = hosts
        self._lock = threading.Lock()
        self._read_at = -FRESH_SECONDS
        self._zones: dict[str, frozenset[str]] = {}

    def _current(self) -> dict[str, frozenset[str]]:
        now = time.monotonic()
        with self._lock:
            if now - self._read_at >= FRESH_SECONDS:
                with _keeping_what_was_known("the zones"):
                    zones = self.hosts.zones()
                    self._zones = {z: frozenset({zone_aggregate(z)}) for z in sorted(zones)}
                    self._read_at = now
            return self._zones

    def forget(self) -> None:
        """Read the zones again at the next look (a host registered in one, here)."""
        with self._lock:
            self._read_at = -FRESH_SECONDS

    def __getitem__(self, zone: str) -> frozenset[str]:
        return self._current()[zone]

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())
