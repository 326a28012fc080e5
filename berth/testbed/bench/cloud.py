"""The bench's synthetic cloud: hosts, GPU children and sharing disk providers, then (optionally)
allocations already in place."""

from __future__ import annotations

import time
import uuid as uuidlib
from typing import Any

from berth.testbed.bench import log
from berth.testbed.client import Client
from berth.testbed.errors import TestbedError
from berth.testbed.layout import Inventory, ProviderSpec, create_custom_traits, create_tree, remove_layout
from berth.testbed.parallel import Stop, parallel

FAST_TRAIT = "CUSTOM_BENCH_FAST"
RARE_TRAIT = "CUSTOM_BENCH_RARE"
AVX2_TRAIT = "HW_CPU_X86_AVX2"
SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"
HOSTS_PER_SHARING_PROVIDER = 100
BENCH_PROJECT = "bbbbbbbb-0000-4000-8000-000000000001"
BENCH_USER = "bbbbbbbb-0000-4000-8000-000000000002"

# As Nova reports a host: max_unit is the host's own size, the ratios over-commit beyond it.
HOST_INVENTORY: Inventory = {
    "VCPU": {"total": 32, "max_unit": 32, "allocation_ratio": 4.0},
    "MEMORY_MB": {"total": 131072, "reserved": 512, "max_unit": 131072, "allocation_ratio": 2.5},
    "DISK_GB": {"total": 2000, "max_unit": 2000},
}
GPU_INVENTORY: Inventory = {"VGPU": {"total": 4}}
SHARING_INVENTORY: Inventory = {"DISK_GB": {"total": 100000}}

# The hosts i % 100 == residue carry what only 1 % of the cloud has (the worst candidate queries ask
# for it): odd residues not ending in 1, so none of them has a GPU child or a sharing aggregate.
RARE_EVERY = 100
RARE_TRAIT_RESIDUE = 3
RARE_AGGREGATE_RESIDUE = 7

PRELOAD_RESOURCES = {"VCPU": 1, "MEMORY_MB": 256, "DISK_GB": 1}
PRELOAD_CONSUMERS_PER_REQUEST = 500


def has_sharing(i: int) -> bool:
    return i % 10 == 1


def sharing_group(i: int) -> int:
    # The hosts with i % 10 == 1 are 1, 11, 21, ...; every 100 of them share one provider.
    return (i // 10) // HOSTS_PER_SHARING_PROVIDER


def sharing_host_count(hosts: int) -> int:
    return (hosts - 2) // 10 + 1 if hosts >= 2 else 0


def sharing_provider_count(hosts: int) -> int:
    return -(-sharing_host_count(hosts) // HOSTS_PER_SHARING_PROVIDER)


def is_rare(i: int, residue: int) -> bool:
    return i % RARE_EVERY == residue


def rare_host_count(hosts: int, residue: int) -> int:
    """How many of ``hosts`` hosts have ``i % RARE_EVERY == residue``."""
    return max(0, (hosts - residue + RARE_EVERY - 1) // RARE_EVERY)


def host_spec(i: int, aggregates: list[str], rare_aggregate: str = "") -> ProviderSpec:
    """Host ``cn-{i}``; ``aggregates``: those of the sharing providers, by sharing group;
    ``rare_aggregate``: the one of 1 % of the hosts."""
    traits = [AVX2_TRAIT, FAST_TRAIT] if i % 2 == 0 else []
    if is_rare(i, RARE_TRAIT_RESIDUE):
        traits = [RARE_TRAIT]
    host_aggregates = [aggregates[sharing_group(i)]] if has_sharing(i) else []
    if rare_aggregate and is_rare(i, RARE_AGGREGATE_RESIDUE):
        host_aggregates = [rare_aggregate]
    return ProviderSpec(
        f"cn-{i}",
        inventory=HOST_INVENTORY,
        traits=traits,
        aggregates=host_aggregates,
        children=[ProviderSpec(f"cn-{i}-gpu", inventory=GPU_INVENTORY)] if i % 5 == 0 else [],
    )


def build_layout(client: Client, hosts: int, threads: int, stop: Stop) -> dict[str, Any]:
    """Create the providers of ``hosts`` compute hosts; returns uuids and timing."""
    started = time.perf_counter()
    create_custom_traits(client, [FAST_TRAIT, RARE_TRAIT])
    aggregates = [str(uuidlib.uuid4()) for _ in range(sharing_provider_count(hosts))]
    rare_aggregate = str(uuidlib.uuid4())
    sharing_specs = [
        ProviderSpec(f"share-{k}", inventory=SHARING_INVENTORY, traits=[SHARING_TRAIT], aggregates=[aggregate])
        for k, aggregate in enumerate(aggregates)
    ]
    sharing = parallel(sharing_specs, threads, lambda spec: create_tree(client, spec)[0], stop, client=client)
    made = parallel(
        range(hosts),
        threads,
        lambda i: create_tree(client, host_spec(i, aggregates, rare_aggregate)),
        stop,
        client=client,
        progress=lambda done: log(f"  hosts built: {done}/{hosts}"),
    )
    elapsed = time.perf_counter() - started
    host_uuids = [tree[0] for tree in made]
    gpu_uuids = [tree[1] for tree in made if len(tree) > 1]
    providers = len(host_uuids) + len(gpu_uuids) + len(sharing)
    return {
        "hosts": host_uuids,
        "gpus": gpu_uuids,
        "sharing": sharing,
        "rare_aggregate": rare_aggregate,
        "providers": providers,
        "seconds": elapsed,
        "providers_per_second": providers / elapsed,
    }


def preload_allocations(
    client: Client, layout: dict[str, Any], records: int, threads: int, stop: Stop
) -> dict[str, Any]:
    """Write ``records`` allocation records, three per consumer (``PRELOAD_RESOURCES`` on one host,
    hosts taken in turn), in batches of ``POST /allocations``.  Returns the consumers, what each host
    received, and the rate."""
    hosts = layout["hosts"]
    per_consumer = len(PRELOAD_RESOURCES)
    consumers = [str(uuidlib.uuid4()) for _ in range(-(-records // per_consumer))]
    batches = [
        list(range(start, min(start + PRELOAD_CONSUMERS_PER_REQUEST, len(consumers))))
        for start in range(0, len(consumers), PRELOAD_CONSUMERS_PER_REQUEST)
    ]

    def write(batch: list[int]) -> None:
        body = {
            consumers[n]: {
                "allocations": {hosts[n % len(hosts)]: {"resources": PRELOAD_RESOURCES}},
                "project_id": BENCH_PROJECT,
                "user_id": BENCH_USER,
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            }
            for n in batch
        }
        client.call("POST", "/allocations", body, expect=(204,))

    started = time.perf_counter()
    parallel(
        batches,
        threads,
        write,
        stop,
        client=client,
        progress=lambda done: log(f"  allocation batches written: {done}/{len(batches)}"),
    )
    elapsed = time.perf_counter() - started
    held: dict[str, dict[str, int]] = {}
    for n in range(len(consumers)):
        used = held.setdefault(hosts[n % len(hosts)], {})
        for rc, amount in PRELOAD_RESOURCES.items():
            used[rc] = used.get(rc, 0) + amount
    return {
        "consumers": consumers,
        "held": held,
        "records": len(consumers) * per_consumer,
        "seconds": elapsed,
        "records_per_second": len(consumers) * per_consumer / elapsed,
    }


def remove(client: Client, layout: dict[str, Any], consumers: list[str], threads: int, stop: Stop) -> None:
    """Delete what the bench created on a server it did not start (allocations first, then trees)."""
    levels = [layout.get("gpus", []) + layout.get("pci", []), layout.get("hosts", []) + layout.get("sharing", [])]
    remove_layout(client, consumers, levels, threads, stop, log)


def check_empty(client: Client) -> None:
    """A :class:`TestbedError` when a provider of an earlier run is in the way."""
    found = client.call("GET", "/resource_providers?name=cn-0")["resource_providers"]
    if found:
        raise TestbedError(
            "the server already has a provider named cn-0 (left over from an interrupted run?); "
            "use an empty server/database"
        )
