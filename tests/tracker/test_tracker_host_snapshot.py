"""A host's snapshot (``GET /host``) as a scheduler reads it: ``fits`` on it answers what the agent's
own claim then does, flavor after flavor, with the same cells, CPUs, devices and reasons."""

from __future__ import annotations

import pytest
import requests
from agenthelpers import TOKEN, Agent
from trackerhelpers import GPU, flavor, instance, new_uuid

from berth.clients.agent import AgentClient
from berth.clients.errors import ClaimFailed
from berth.clients.placement import PlacementClient
from berth.domain.capacity import INVENTORY_FIELDS
from berth.domain.host.errors import InvalidSnapshot
from berth.domain.host.fitting import Plan
from berth.domain.host.request import Flavor, NumaRequest, PciRequest
from berth.domain.host.snapshot import HostSnapshot, Refusal, fits

# Cell 0 has CPUs 0-3 and a GPU, cell 1 CPUs 4-7, a GPU and a NIC of 4 virtual functions (TOPOLOGY).
# CPUs 2-3 and 6-7 are pinned ones; at a vCPU ratio of 2 each cell floats 4 vCPUs, the host 8.
VF_ON_ITS_CELL = PciRequest(1, resource_class="SRIOV_NET_VF", numa_policy="required")
FLAVORS: list[tuple[Flavor, bool]] = [
    (flavor(3, 2048, 5, numa=NumaRequest(1)), True),  # cell 0
    (flavor(2, 4096, 5, numa=NumaRequest(2)), True),  # one vCPU on each cell: cell 0 is full
    (flavor(2, 1024, 5, cpu_policy="dedicated"), True),  # pins 2-3
    (flavor(1, 1024, 5, numa=NumaRequest(1), pci=(VF_ON_ITS_CELL,)), True),  # cell 1, where the VFs are
    (flavor(2, 512, 5, numa=NumaRequest(2)), False),  # the host has the room, cell 0 has not
    (flavor(1, 512, 5, numa=NumaRequest(1), pci=(PciRequest(4, resource_class="SRIOV_NET_VF"),)), False),
    (flavor(3, 512, 5, cpu_policy="dedicated"), False),  # 2 pinned CPUs left
    (flavor(2, 512, 5, cpu_policy="dedicated", pci=(PciRequest(1, resource_class=GPU),)), True),  # 6-7
    (flavor(2, 512, 5, cpu_policy="dedicated", numa=NumaRequest(2)), False),  # nothing left to pin
    (flavor(1, 512, 5, pci=(PciRequest(2, resource_class=GPU),)), False),  # one GPU left
    (flavor(2, 512, 5000), True),  # the host's last two vCPUs; the disk goes to the shared pool
]


@pytest.fixture(scope="module")
def shared_pool(placement_service):
    """A sharing provider of disk and its aggregate."""
    placement = PlacementClient(placement_service.url)
    pool, aggregate = new_uuid(), new_uuid()
    placement.create_provider(f"nfs-{pool[:8]}", pool)
    placement.set_inventories(pool, 0, {"DISK_GB": {"total": 100000}})
    generation, _ = placement.get_traits(pool)
    generation = placement.set_traits(pool, generation, {"MISC_SHARES_VIA_AGGREGATE"})
    placement.set_aggregates(pool, generation, {aggregate})
    return {"provider_uuid": pool, "aggregate_uuid": aggregate}


@pytest.fixture
def pooled_agent(placement_service, shared_pool, tmp_path):
    """An agent of its own for each test: its usage is only what the test claims."""
    config = {"cpu_dedicated_set": "2-3,6-7", "allocation_ratios": {"VCPU": 2.0}, "shared_storage": shared_pool}
    agent = Agent(placement_service.url, tmp_path, config=config)
    yield agent
    log = agent.stop()
    assert "Traceback" not in log, log


def _claim(client: AgentClient, flv: Flavor) -> Plan | Refusal:
    """What the agent's real claim gave, in the terms of ``fits``."""
    try:
        claim = client.instance_claim(instance(flv))
    except ClaimFailed as e:
        return Refusal(tuple(e.reasons))
    return Plan(claim.allocations, claim.shared_allocations, claim.numa, claim.pci)


def test_fits_on_the_agents_snapshot_answers_as_the_agents_claim_does(pooled_agent):
    client = pooled_agent.client
    verdicts, revisions = [], []
    for flv, _ in FLAVORS:
        snapshot = client.host_snapshot()
        predicted = fits(snapshot, flv)
        actual = _claim(client, flv)
        assert predicted == actual, flv
        verdicts.append(isinstance(actual, Plan))
        revisions.append(snapshot.revision)
        if isinstance(actual, Plan):
            assert actual.numa or not flv.numa_request  # the NUMA flavors really got cells
    assert verdicts == [expected for _, expected in FLAVORS]

    # A snapshot changes with each claim taken, and only then.
    taken = [verdicts[i - 1] for i in range(1, len(verdicts))]
    changed = [revisions[i] != revisions[i - 1] for i in range(1, len(revisions))]
    assert changed == taken


def _claim_a_bit_of_everything(client: AgentClient) -> None:
    for flv in (
        flavor(2, 2048, 5, numa=NumaRequest(2)),
        flavor(2, 1024, 5, cpu_policy="dedicated"),
        flavor(1, 1024, 5, numa=NumaRequest(1), pci=(VF_ON_ITS_CELL, PciRequest(1, resource_class=GPU))),
    ):
        client.instance_claim(instance(flv))


def test_the_snapshot_carries_the_tree_and_the_shared_pool(pooled_agent):
    client = pooled_agent.client
    snapshot, capacity = client.host_snapshot(), client.capacity()
    assert snapshot.host == client.host
    assert snapshot.shared_provider is not None
    assert snapshot.shared_provider == capacity["shared_storage"]
    assert [(c.id, sorted(c.dedicated_cpus)) for c in snapshot.tree.cells] == [(0, [2, 3]), (1, [6, 7])]
    pools = sorted((p.address, p.numa_node, len(p.slots)) for p in (n.pci_pool for n in snapshot.tree.pci_providers))
    assert pools == [("0000:81:00.0", 0, 1), ("0000:c1:00.0", 1, 1), ("0000:c2:00.0", 1, 4)]
    assert {n.uuid for n in snapshot.tree} == set(capacity["providers"])
    for uuid, provider in capacity["providers"].items():
        node = snapshot.tree.by_uuid(uuid)
        inventories = {rc: inv.as_dict() for rc, inv in node.inventories.items()}
        assert inventories == {rc: {k: inv[k] for k in INVENTORY_FIELDS} for rc, inv in provider["inventories"].items()}
        assert node.traits == set(provider["traits"])


def test_the_snapshot_carries_the_claims_usage(pooled_agent):
    client = pooled_agent.client
    _claim_a_bit_of_everything(client)
    snapshot, capacity = client.host_snapshot(), client.capacity()
    for uuid, provider in capacity["providers"].items():
        used = {rc: inv["used"] for rc, inv in provider["inventories"].items() if inv["used"]}
        assert snapshot.usage.provider_totals().get(uuid, {}) == used
    cells = [(c["id"], c["vcpus_used"], c["memory_used"], c["pinned_cpus"]) for c in capacity["cells"]]
    usage = snapshot.usage
    assert [(i, usage.cell_vcpus[i], usage.cell_memory[i], sorted(usage.pinned.get(i, ()))) for i in (0, 1)] == cells
    assert cells[0][3] == [2, 3] and sum(c[1] for c in cells) == 3
    taken = {slot: claim for pool in capacity["pci"] for slot, claim in pool["slots"].items() if claim}
    assert len(taken) == 2 and usage.pci == taken


def test_a_snapshot_reads_back_as_it_was_written(pooled_agent):
    _claim_a_bit_of_everything(pooled_agent.client)
    snapshot = pooled_agent.client.host_snapshot()
    again = HostSnapshot.from_dict(snapshot.to_dict())
    assert again.to_dict() == snapshot.to_dict()
    retaken = HostSnapshot.take(again.host, again.tree, again.usage, shared_provider=again.shared_provider, taken_at=0)
    assert retaken.revision == snapshot.revision


def test_the_snapshot_needs_the_token_and_a_malformed_one_is_refused(pooled_agent):
    assert requests.get(pooled_agent.url + "/host", timeout=5).status_code == 401
    document = requests.get(pooled_agent.url + "/host", headers={"X-Auth-Token": TOKEN}, timeout=5).json()
    del document["usage"]
    with pytest.raises(InvalidSnapshot, match="usage"):
        HostSnapshot.from_dict(document)
