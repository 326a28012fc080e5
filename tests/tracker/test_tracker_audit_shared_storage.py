"""The audit of hosts whose disk lives on a sharing provider, through the agents' HTTP API.

Three agents of fake hosts: two put DISK_GB on one sharing provider (in their aggregate), the third
keeps its own disk. An instance's claim holds CPUs, memory and a GPU on its host's tree and its disk
on the pool; the audit must compare, and heal, all of it.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from agenthelpers import Agent, assert_remote_books_agree
from trackerhelpers import GPU, flavor, instance, new_uuid

from berth.clients.placement import PlacementClient
from berth.domain.host.request import PciRequest
from berth.tracker.auditing.audit import ALLOCATION_MISMATCH, CLAIM_WITHOUT_ALLOCATIONS, USAGE_MISMATCH


def _sharing_provider(placement) -> tuple[str, str]:
    pool, aggregate = new_uuid(), new_uuid()
    placement.create_provider(f"nfs-{pool[:8]}", pool)
    placement.set_inventories(pool, 0, {"DISK_GB": {"total": 1000}})
    generation, _ = placement.get_traits(pool)
    generation = placement.set_traits(pool, generation, {"MISC_SHARES_VIA_AGGREGATE"})
    placement.set_aggregates(pool, generation, {aggregate})
    return pool, aggregate


@pytest.fixture(scope="module")
def pooled(placement_service, tmp_path_factory):
    placement = PlacementClient(placement_service.url)
    pool, aggregate = _sharing_provider(placement)
    shared = {"shared_storage": {"provider_uuid": pool, "aggregate_uuid": aggregate}}
    tmp = tmp_path_factory.mktemp("pooled")
    agents = [
        Agent(placement_service.url, tmp, config=shared),
        Agent(placement_service.url, tmp, config=shared),
        Agent(placement_service.url, tmp),
    ]
    yield SimpleNamespace(pool=pool, agents=agents)
    for agent in agents:
        log = agent.stop()
        assert "Traceback" not in log, log


def _write(placement, consumer, allocations):
    state = placement.consumer(consumer)
    placement.write_consumers(
        {
            consumer: {
                "allocations": allocations,
                "generation": state.generation,
                "project_id": "project-1",
                "user_id": "user-1",
                "consumer_type": "INSTANCE",
            }
        }
    )


@pytest.fixture
def claims(pooled):
    """An instance with a GPU and 2 GB on the pool on the first host, neighbours on the other two;
    all deleted afterwards."""
    first, second, third = (agent.client for agent in pooled.agents)
    inst = instance(flavor(2, 1024, 2, pci=(PciRequest(1, resource_class=GPU),)))
    claim = first.instance_claim(inst)
    neighbours = [instance(flavor(1, 512, 3)), instance(flavor(1, 512, 4))]
    second.instance_claim(neighbours[0])
    third.instance_claim(neighbours[1])
    assert claim.shared_allocations == {pooled.pool: {"DISK_GB": 2}}
    assert {rc for res in claim.allocations.values() for rc in res} == {"VCPU", "MEMORY_MB", GPU}
    yield inst, claim
    for agent in pooled.agents:
        for each in (inst, *neighbours):
            agent.client.delete_instance(each.uuid)


def _of(report, kind, key, value):
    return [f for f in report["findings"] if f["kind"] == kind and f.get(key) == value]


def test_the_heal_writes_back_the_shared_disk_with_the_rest_of_the_claim(pooled, claims, placement):
    first, second, third = (agent.client for agent in pooled.agents)
    inst, claim = claims
    whole = {**claim.allocations, **claim.shared_allocations}
    assert placement.consumer(inst.uuid).allocations == whole
    pool_used = placement.usages(pooled.pool)["DISK_GB"]
    assert_remote_books_agree(placement, first, second, third)

    placement.request("DELETE", f"/allocations/{inst.uuid}")
    report = first.audit(heal=True)

    assert placement.consumer(inst.uuid).allocations == whole  # the host's tree and the shared disk
    assert placement.usages(pooled.pool)["DISK_GB"] == pool_used
    [finding] = _of(report, CLAIM_WITHOUT_ALLOCATIONS, "consumer_uuid", inst.uuid)
    assert finding["healed"] == "rewritten"
    assert finding["missing"] == whole
    assert _of(report, USAGE_MISMATCH, "provider_uuid", pooled.pool)
    assert report["consistent"], report["residual"]
    for client in (first, second, third):
        assert client.audit(heal=False)["consistent"]
    assert_remote_books_agree(placement, first, second, third)


@pytest.mark.parametrize("restart", [False, True], ids=["same-agent", "restarted-agent"])
def test_later_audits_report_a_pool_usage_that_differs_from_the_claims(pooled, claims, placement, restart):
    inst, claim = claims
    whole = {**claim.allocations, **claim.shared_allocations}
    # The instance keeps its host's allocations; its disk on the pool is gone, then wrong.
    for wrong in ({}, {pooled.pool: {"DISK_GB": 7}}):
        _write(placement, inst.uuid, {**claim.allocations, **wrong})
        if restart:
            pooled.agents[0].stop()
            pooled.agents[0].start()
        first, second, third = (agent.client for agent in pooled.agents)

        report = first.audit(heal=False)
        assert not report["consistent"]
        [mismatch] = _of(report, ALLOCATION_MISMATCH, "consumer_uuid", inst.uuid)
        assert mismatch["claimed"] == whole and mismatch["held"] == {**claim.allocations, **wrong}
        [pool_usage] = _of(report, USAGE_MISMATCH, "provider_uuid", pooled.pool)
        assert "{'DISK_GB': 2}" in pool_usage["detail"]
        assert [c.claim_id for c in first.claims_for_instance(inst.uuid)] == [claim.claim_id]
        # The other host on the pool answers for its own share only, which is right.
        assert second.audit(heal=False)["consistent"] and third.audit(heal=False)["consistent"]

        assert first.audit(heal=True)["consistent"]
        assert placement.consumer(inst.uuid).allocations == whole
    assert_remote_books_agree(placement, first, second, third)


def test_a_restarted_agent_keeps_a_claim_whose_instance_holds_only_its_shared_disk(pooled, claims, placement):
    inst, claim = claims
    whole = {**claim.allocations, **claim.shared_allocations}
    _write(placement, inst.uuid, claim.shared_allocations)  # lost on the host, not moved elsewhere

    agent = pooled.agents[0]
    agent.stop()
    agent.start()
    assert [c.claim_id for c in agent.client.claims_for_instance(inst.uuid)] == [claim.claim_id]
    report = agent.client.audit(heal=True)
    assert report["evacuations"] == [] and report["consistent"], report
    assert placement.consumer(inst.uuid).allocations == whole
    assert_remote_books_agree(placement, *(a.client for a in pooled.agents))
