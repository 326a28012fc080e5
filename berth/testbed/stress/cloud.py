"""The stress run's small cloud: hosts racing to be full, some with a GPU child, one sharing disk, all
in one aggregate of the run (``member_of`` keeps a run on its own providers on a shared server)."""

from __future__ import annotations

import uuid as uuidlib
from typing import Any

from berth.testbed.client import Client
from berth.testbed.layout import Inventory, ProviderSpec, create_tree, remove_layout
from berth.testbed.parallel import Stop, parallel

SETUP_THREADS = 4
SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"
# Small hosts, so that claimers race for the last units.  Odd hosts exercise reserved and the ratio.
HOST_INVENTORY_EVEN: Inventory = {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 8192}}
HOST_INVENTORY_ODD: Inventory = {
    "VCPU": {"total": 4, "allocation_ratio": 2.0},
    "MEMORY_MB": {"total": 8704, "reserved": 512},
}
GPU_INVENTORY: Inventory = {"VGPU": {"total": 2}}
GPU_EVERY = 3  # every third host has a nested child with VGPUs
SHARING_DISK_GB = 400


def host_spec(run_id: str, i: int, aggregate: str) -> ProviderSpec:
    name = f"stress-{run_id}-host-{i:03d}"
    inventory: Inventory = HOST_INVENTORY_EVEN if i % 2 == 0 else HOST_INVENTORY_ODD
    return ProviderSpec(
        name,
        inventory=inventory,
        aggregates=[aggregate],
        children=[ProviderSpec(f"{name}-gpu", inventory=GPU_INVENTORY)] if i % GPU_EVERY == 0 else [],
    )


def build_layout(client: Client, hosts: int, run_id: str) -> dict[str, Any]:
    """The providers of the run: ``hosts`` (uuids), ``gpus`` (host -> child), ``sharing``,
    ``aggregate``, ``names`` (uuid -> short name) and ``all``."""
    aggregate = str(uuidlib.uuid4())
    sharing_spec = ProviderSpec(
        f"stress-{run_id}-shared-disk",
        inventory={"DISK_GB": {"total": SHARING_DISK_GB}},
        traits=[SHARING_TRAIT],
        aggregates=[aggregate],
    )
    sharing = create_tree(client, sharing_spec)[0]
    layout: dict[str, Any] = {
        "hosts": [],
        "gpus": {},
        "sharing": sharing,
        "aggregate": aggregate,
        "names": {sharing: "shared-disk"},
    }
    trees = parallel(
        range(hosts),
        SETUP_THREADS,
        lambda i: create_tree(client, host_spec(run_id, i, aggregate)),
        Stop(),
        client=client,
    )
    for i, tree in enumerate(trees):
        host = tree[0]
        layout["hosts"].append(host)
        layout["names"][host] = f"host-{i:03d}"
        if len(tree) > 1:
            layout["gpus"][host] = tree[1]
            layout["names"][tree[1]] = f"host-{i:03d}-gpu"
    layout["all"] = [*layout["hosts"], *layout["gpus"].values(), sharing]
    return layout


def remove(client: Client, layout: dict[str, Any], consumers: list[str]) -> None:
    """Delete the run's consumers and providers from a server that is not thrown away."""
    levels = [list(layout["gpus"].values()), [*layout["hosts"], layout["sharing"]]]
    remove_layout(client, consumers, levels, SETUP_THREADS, Stop())
