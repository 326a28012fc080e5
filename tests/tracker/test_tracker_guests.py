"""The agent's guest side over HTTP: guests run in live claims, spawn and destroy are idempotent,
spawns fail on request, guests outlive a killed agent, and moves carry them between agents."""

from __future__ import annotations

import random
import signal
import time

import pytest
import requests
from agenthelpers import TOKEN, Agent, two_agents
from trackerhelpers import SMALL, flavor, instance, new_uuid

from berth.clients import agent_error_codes
from berth.clients.errors import AgentError, InvalidRequest
from berth.tracker.moving import moves


@pytest.fixture(scope="module")
def agents(placement_service, tmp_path_factory):
    with two_agents(placement_service.url, tmp_path_factory.mktemp("guest-agents")) as pair:
        yield pair


def _spawn(agent, instance_uuid, claim_id):
    """The raw answer, to see the status code the client hides."""
    return requests.post(
        f"{agent.url}/guests/{instance_uuid}", json={"claim_id": claim_id}, headers={"X-Auth-Token": TOKEN}, timeout=10
    )


def _refused(code, call, *args, **kwargs):
    with pytest.raises(AgentError) as caught:
        call(*args, **kwargs)
    assert caught.value.code == code, caught.value.message
    return caught.value


def test_spawn_and_destroy_are_idempotent_and_need_a_live_claim(agents):
    agent = agents[0]
    client = agent.client
    inst = instance(flavor(2, 1024, 5))
    claim = client.instance_claim(inst)

    first = _spawn(agent, inst.uuid, claim.claim_id)
    assert first.status_code == 201
    guest = first.json()
    assert guest["uuid"] == inst.uuid and guest["state"] == "running" and guest["claim_id"] == claim.claim_id
    assert guest["resources"] == {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 5}
    again = _spawn(agent, inst.uuid, claim.claim_id)
    assert again.status_code == 200 and again.json() == guest
    assert [g for g in client.guests() if g["uuid"] == inst.uuid] == [guest]

    # A claim that is not this instance's, or no claim at all, runs nothing.
    other = instance(flavor(1, 512))
    other_claim = client.instance_claim(other)
    error = _refused(agent_error_codes.GUEST_NO_LIVE_CLAIM, client.spawn_guest, inst.uuid, other_claim.claim_id)
    assert error.status == 409
    _refused(agent_error_codes.GUEST_NO_LIVE_CLAIM, client.spawn_guest, new_uuid(), new_uuid())
    with pytest.raises(InvalidRequest, match="claim_id"):
        client._call("POST", f"/guests/{other.uuid}", {})
    client.soft_delete_instance(other.uuid)
    _refused(agent_error_codes.GUEST_NO_LIVE_CLAIM, client.spawn_guest, other.uuid, other_claim.claim_id)
    assert other.uuid not in {g["uuid"] for g in client.guests()}

    assert client.destroy_guest(inst.uuid) == "destroyed"
    assert client.destroy_guest(inst.uuid) == "absent"
    assert inst.uuid not in {g["uuid"] for g in client.guests()}
    # Destroyed, it can be spawned again in the same claim.
    assert _spawn(agent, inst.uuid, claim.claim_id).status_code == 201
    client.delete_instance(inst.uuid)
    client.delete_instance(other.uuid)
    client.destroy_guest(inst.uuid)


def test_a_guest_in_another_claim_is_a_conflict(agents):
    client = agents[0].client
    inst = instance(flavor(1, 512))
    claim = client.instance_claim(inst)
    client.spawn_guest(inst.uuid, claim.claim_id)
    client.abort(claim.claim_id)  # the guest outlives its claim ...
    fresh = client.instance_claim(inst)
    error = _refused(agent_error_codes.GUEST_CONFLICT, client.spawn_guest, inst.uuid, fresh.claim_id)
    assert claim.claim_id in error.message
    client.destroy_guest(inst.uuid)  # ... until destroyed
    assert client.spawn_guest(inst.uuid, fresh.claim_id)["claim_id"] == fresh.claim_id
    client.delete_instance(inst.uuid)
    client.destroy_guest(inst.uuid)


def test_the_next_spawns_fail_on_request(agents):
    client = agents[1].client
    inst = instance(flavor(1, 512))
    claim = client.instance_claim(inst)
    assert client.set_faults(fail_next_spawns=2) == {
        "fail_next_spawns": 2,
        "spawn_failure_rate": 0.0,
        "seed": None,
        "spawn_seconds": 0.0,
    }
    for _ in range(2):
        error = _refused(agent_error_codes.GUEST_SPAWN_FAILED, client.spawn_guest, inst.uuid, claim.claim_id)
        assert error.status == 500 and "injected fault" in error.message
        assert inst.uuid not in {g["uuid"] for g in client.guests()}
    assert client.claims_for_instance(inst.uuid)[0].claim_id == claim.claim_id  # the caller aborts it
    assert client.spawn_guest(inst.uuid, claim.claim_id)["state"] == "running"
    client.delete_instance(inst.uuid)
    client.destroy_guest(inst.uuid)


def test_spawns_fail_with_a_seeded_probability(agents):
    client = agents[1].client
    inst = instance(flavor(1, 512))
    claim = client.instance_claim(inst)

    def outcomes(rounds):
        failed = []
        for _ in range(rounds):
            try:
                client.spawn_guest(inst.uuid, claim.claim_id)
            except AgentError as e:
                assert e.code == agent_error_codes.GUEST_SPAWN_FAILED
                failed.append(True)
            else:
                client.destroy_guest(inst.uuid)
                failed.append(False)
        return failed

    client.set_faults(spawn_failure_rate=0.5, seed=11)
    first = outcomes(20)
    draw = random.Random(11)
    assert first == [draw.random() < 0.5 for _ in range(20)]
    assert 0 < sum(first) < 20
    client.set_faults(seed=11)  # the same seed, the same run
    assert outcomes(20) == first
    client.set_faults(spawn_failure_rate=1.0)
    assert outcomes(3) == [True] * 3
    client.set_faults(spawn_failure_rate=0.0)
    assert outcomes(3) == [False] * 3
    with pytest.raises(InvalidRequest, match="spawn_failure_rate"):
        client.set_faults(spawn_failure_rate=1.5)
    with pytest.raises(InvalidRequest, match="unknown keys: fail_always"):
        client._call("POST", "/faults", {"fail_always": True})
    client.delete_instance(inst.uuid)


def test_faults_from_the_configuration(placement_service, tmp_path):
    agent = Agent(placement_service.url, tmp_path, topology={**SMALL, "faults": {"fail_next_spawns": 1}})
    try:
        client = agent.client
        inst = instance(flavor(1, 512))
        claim = client.instance_claim(inst)
        _refused(agent_error_codes.GUEST_SPAWN_FAILED, client.spawn_guest, inst.uuid, claim.claim_id)
        assert client.spawn_guest(inst.uuid, claim.claim_id)["claim_id"] == claim.claim_id
    finally:
        assert "Traceback" not in agent.stop()


def test_guests_survive_an_agent_killed_with_sigkill(placement_service, tmp_path):
    agent = Agent(placement_service.url, tmp_path, topology=SMALL)
    try:
        kept, gone = instance(flavor(1, 512)), instance(flavor(1, 512))
        claims = {i.uuid: agent.client.instance_claim(i) for i in (kept, gone)}
        for inst in (kept, gone):
            agent.client.spawn_guest(inst.uuid, claims[inst.uuid].claim_id)
        agent.client.destroy_guest(gone.uuid)
        before = agent.client.guests()
        agent.stop(signal.SIGKILL)
        agent.start()
        assert agent.client.guests() == before
        assert [g["uuid"] for g in before] == [kept.uuid] and before[0]["claim_id"] == claims[kept.uuid].claim_id
        # The same claim, the same guest: a conductor retrying after the crash gets a 200.
        assert _spawn(agent, kept.uuid, claims[kept.uuid].claim_id).status_code == 200
    finally:
        agent.stop()


def test_a_live_migration_carries_the_guest_between_agents(agents, placement):
    source, dest = (agent.client for agent in agents)
    inst = instance(flavor(1, 512))
    claim = source.instance_claim(inst)
    source.spawn_guest(inst.uuid, claim.claim_id)
    migration = new_uuid()

    # The guest moves only inside a move: the source must have handed its claim over.
    _refused(agent_error_codes.GUEST_NO_LIVE_CLAIM, source.migrate_guest, inst.uuid, destination_host=dest.host)
    moved = moves.start_move(source, dest, inst, migration, kind="live_migration")
    _refused(agent_error_codes.GUEST_NO_LIVE_CLAIM, dest.migrate_guest, inst.uuid, claim_id=claim.claim_id)
    arrived = dest.migrate_guest(inst.uuid, claim_id=moved.claim_id)
    assert arrived["claim_id"] == moved.claim_id and arrived["state"] == "running"
    assert dest.migrate_guest(inst.uuid, claim_id=moved.claim_id) == arrived
    assert source.migrate_guest(inst.uuid, destination_host=dest.host)["result"] == "migrated"
    assert source.migrate_guest(inst.uuid, destination_host=dest.host)["result"] == "absent"
    with pytest.raises(InvalidRequest, match="destination_host"):
        source.migrate_guest(inst.uuid)
    moves.confirm_move(source, dest, migration)

    assert inst.uuid not in {g["uuid"] for g in source.guests()}
    assert [g["claim_id"] for g in dest.guests() if g["uuid"] == inst.uuid] == [moved.claim_id]
    for client in (source, dest):
        assert client.audit(heal=False)["consistent"]
    dest.delete_instance(inst.uuid)
    dest.destroy_guest(inst.uuid)
    assert placement.consumer(inst.uuid).allocations == {}


def test_the_linux_driver_refuses_the_guest_side(tmp_path):
    from berth.tracker.drivers.linux import LinuxDriver
    from berth.tracker.errors import GuestNotSupported

    driver = LinuxDriver(str(tmp_path))
    for call in (
        lambda: driver.spawn(new_uuid(), None),
        lambda: driver.destroy(new_uuid()),
        lambda: driver.migrate_out(new_uuid(), "elsewhere"),
        lambda: driver.set_faults({"fail_next_spawns": 1}),
    ):
        with pytest.raises(GuestNotSupported, match="the linux driver cannot .*: it only discovers guests"):
            call()


def test_spawns_take_as_long_as_asked_and_a_wrong_delay_is_refused(agents):
    client = agents[1].client
    inst = instance(flavor(1, 512))
    claim = client.instance_claim(inst)
    client.set_faults(spawn_seconds=0.6)
    began = time.monotonic()
    client.spawn_guest(inst.uuid, claim.claim_id)
    assert time.monotonic() - began >= 0.6
    assert client.set_faults(spawn_seconds=0)["spawn_seconds"] == 0.0
    with pytest.raises(InvalidRequest) as refused:
        client.set_faults(spawn_seconds=600)
    assert "spawn_seconds" in str(refused.value)
    client.delete_instance(inst.uuid)
    client.destroy_guest(inst.uuid)
