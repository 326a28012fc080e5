"""The books at the end of a run, read from the service (every provider's inventories, usages and
allocations) and from every host's agent (its persisted claims), into ``invariants.Books``."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from berth.clients.agent import AgentClient
from berth.clients.placement import PlacementClient
from berth.domain.capacity import capacity
from berth.testbed.sim.checks.invariants import Books, Provider, ProviderAmounts

READERS = 8


def read_books(
    placement_url: str, agents: Callable[[], Mapping[str, AgentClient]], pools: Mapping[str, str | None]
) -> Books:
    """``agents``: every host's agent client, for the calling thread; ``pools``: host -> the uuid of
    the sharing disk provider it uses, if any."""
    listing = PlacementClient(placement_url).get("/resource_providers")["resource_providers"]
    clients: dict[int, PlacementClient] = {}

    def read_provider(entry: dict[str, Any]) -> tuple[Provider, str, dict[str, dict[str, int]]]:
        client = clients.setdefault(threading.get_ident(), PlacementClient(placement_url))
        uuid = str(entry["uuid"])
        inventories = client.get(f"/resource_providers/{uuid}/inventories")["inventories"]
        # Not named ``capacity``: that would hide the domain's function from the comprehension.
        room = {rc: capacity(inv["total"], inv["reserved"], inv["allocation_ratio"]) for rc, inv in inventories.items()}
        usages = client.usages(uuid)
        return (
            Provider(uuid, str(entry["name"]), room, usages),
            str(entry["root_provider_uuid"]),
            client.provider_allocations(uuid),
        )

    with ThreadPoolExecutor(READERS) as pool:
        read = list(pool.map(read_provider, listing))
        hosts = list(agents())
        claims = dict(zip(hosts, pool.map(lambda host: _claims(agents()[host]), hosts), strict=True))
    providers = {p.uuid: p for p, _, _ in read}
    allocations: dict[str, ProviderAmounts] = {}
    for provider, _, held in read:
        for consumer, amounts in held.items():
            allocations.setdefault(consumer, {})[provider.uuid] = amounts
    roots = {p.name: p.uuid for p, root, _ in read if root == p.uuid}
    trees: dict[str, set[str]] = {host: set() for host in hosts}
    by_root = {uuid: host for host, uuid in roots.items() if host in trees}
    for provider, root, _ in read:
        if root in by_root:
            trees[by_root[root]].add(provider.uuid)
    shared = {host: {uuid} if uuid else set() for host, uuid in pools.items()}
    return Books(providers, allocations, trees, shared, claims)


def _claims(agent: AgentClient) -> dict[str, ProviderAmounts]:
    """Consumer -> provider -> class -> amount over the host's persisted claims (the shared disk included)."""
    held: dict[str, ProviderAmounts] = {}
    for claim in agent.claims_for_host(agent.host):
        record = claim.record
        mine = held.setdefault(record.consumer_uuid, {})
        for part in (record.allocations, record.shared_allocations):
            for rp, amounts in part.items():
                into = mine.setdefault(rp, {})
                for rc, n in amounts.items():
                    into[rc] = into.get(rc, 0) + n
    return held
