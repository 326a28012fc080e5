"""The audit over HTTP against guests an agent really runs: a guest without a claim and a running
instance's claim without a guest are findings; a move in flight is not; the heals stay safe."""

from __future__ import annotations

import signal

import pytest
import requests
from agenthelpers import Agent
from trackerhelpers import SMALL, flavor, instance, new_uuid

from berth.clients.errors import AgentError, InvalidRequest
from berth.tracker import guests
from berth.tracker.auditing.audit import ALLOCATIONS_WITHOUT_CLAIM, CLAIM_WITHOUT_INSTANCE, INSTANCE_WITHOUT_CLAIM
from berth.tracker.drivers.fake import FakeDriver
from berth.tracker.facts import STOPPED, Guest
from berth.tracker.moving import moves

# No grace: a claim without a guest is a finding at once; no periodic audit in the tests' way.
AUDIT = {"audit": {"interval": 0, "orphan_grace_seconds": 0}}


@pytest.fixture
def agent(placement_service, tmp_path):
    started = Agent(placement_service.url, tmp_path, topology=SMALL, config=AUDIT)
    yield started
    assert "Traceback" not in started.stop()


def _findings(report, kind):
    return {f["instance_uuid"]: f for f in report["findings"] if f["kind"] == kind}


def test_guests_and_claims_that_do_not_match_are_found_and_safely_healed(agent, placement):
    client = agent.client
    healthy, failed, deleted = (instance(flavor(1, 512)) for _ in range(3))
    claims = {i.uuid: client.instance_claim(i) for i in (healthy, failed, deleted)}
    client.spawn_guest(healthy.uuid, claims[healthy.uuid].claim_id)
    client.set_faults(fail_next_spawns=1)
    with pytest.raises(AgentError):
        client.spawn_guest(failed.uuid, claims[failed.uuid].claim_id)  # and nobody aborted its claim
    client.spawn_guest(deleted.uuid, claims[deleted.uuid].claim_id)
    client.delete_instance(deleted.uuid)  # the claim is gone, the guest was left behind

    report = client.audit(heal=False)
    orphan_claims = _findings(report, CLAIM_WITHOUT_INSTANCE)
    orphan_guests = _findings(report, INSTANCE_WITHOUT_CLAIM)
    assert (
        set(orphan_claims) == {failed.uuid} and orphan_claims[failed.uuid]["claim_id"] == claims[failed.uuid].claim_id
    )
    assert set(orphan_guests) == {deleted.uuid}
    assert orphan_guests[deleted.uuid]["claim_id"] == claims[deleted.uuid].claim_id
    assert "spawned in claim" in orphan_guests[deleted.uuid]["detail"]
    assert not report["consistent"]

    healed = client.audit(heal=True)
    assert _findings(healed, CLAIM_WITHOUT_INSTANCE)[failed.uuid]["healed"] == "released"
    assert client.claims_for_instance(failed.uuid) == [] and placement.consumer(failed.uuid).allocations == {}
    # Nothing to adopt for the left-behind guest, and a guest is never destroyed by the audit.
    assert "healed" not in _findings(healed, INSTANCE_WITHOUT_CLAIM)[deleted.uuid]
    assert deleted.uuid in {g["uuid"] for g in client.guests()}
    assert [f["kind"] for f in healed["residual"]] == [INSTANCE_WITHOUT_CLAIM]
    # The healthy instance was never in question.
    assert healthy.uuid not in _findings(healed, CLAIM_WITHOUT_INSTANCE)
    assert [c.claim_id for c in client.claims_for_instance(healthy.uuid)] == [claims[healthy.uuid].claim_id]

    client.destroy_guest(deleted.uuid)
    assert client.audit(heal=False)["consistent"]


def test_orphan_guests_planted_on_a_running_agent_are_reported_and_adopted_when_placement_holds_them(agent, placement):
    client = agent.client
    root = requests.get(agent.url + "/", timeout=5).json()["root_provider_uuid"]
    # Started outside the tracker: one Placement knows nothing of, one whose claim was lost while
    # Placement kept its allocations on this host.
    unknown, lost = new_uuid(), new_uuid()
    planted = client.plant_guest(unknown, resources={"VCPU": 1, "MEMORY_MB": 256})
    assert planted == {
        "uuid": unknown,
        "state": "running",
        "claim_id": None,
        "resources": {"VCPU": 1, "MEMORY_MB": 256},
    }
    client.plant_guest(lost, state="stopped")
    assert {g["uuid"]: g["state"] for g in client.guests()} == {unknown: "running", lost: "stopped"}
    held = {root: {"VCPU": 1, "MEMORY_MB": 512}}
    placement.write_consumers(
        {
            lost: {
                "allocations": held,
                "generation": None,
                "project_id": "p",
                "user_id": "u",
                "consumer_type": "INSTANCE",
            }
        }
    )

    report = client.audit(heal=False)
    orphans = _findings(report, INSTANCE_WITHOUT_CLAIM)
    assert set(orphans) == {unknown, lost}
    assert "claim_id" not in orphans[unknown] and "spawned in claim" not in orphans[unknown]["detail"]
    assert [f["consumer_uuid"] for f in report["findings"] if f["kind"] == ALLOCATIONS_WITHOUT_CLAIM] == [lost]
    assert not report["consistent"]

    healed = client.audit(heal=True)
    orphans = _findings(healed, INSTANCE_WITHOUT_CLAIM)
    assert orphans[lost]["healed"] == "adopted"
    # Nothing to adopt for the unknown one, and the audit never destroys a guest.
    assert "healed" not in orphans[unknown]
    adopted = client.claims_for_instance(lost)
    assert len(adopted) == 1 and adopted[0].allocations == held
    assert placement.consumer(lost).allocations == held
    assert {g["uuid"] for g in client.guests()} == {unknown, lost}
    assert [(f["kind"], f["instance_uuid"]) for f in healed["residual"]] == [(INSTANCE_WITHOUT_CLAIM, unknown)]

    # An orphan has no guest and no claim here already.
    for taken in (unknown, lost):
        with pytest.raises(AgentError) as refused:
            client.plant_guest(taken)
        assert refused.value.status == 409 and refused.value.code == "guest.conflict"
    with pytest.raises(InvalidRequest):
        client.plant_guest(new_uuid(), state="crashed")

    # Planted guests are the driver's like any other: a restarted agent still reports them.
    assert "Traceback" not in agent.stop()
    agent.start()
    assert set(_findings(agent.client.audit(heal=False), INSTANCE_WITHOUT_CLAIM)) == {unknown}
    agent.client.destroy_guest(unknown)
    assert agent.client.audit(heal=False)["consistent"]


def test_guests_the_fake_driver_has_before_its_tracker_is_built_are_kept_and_reported(hosts):
    first = hosts(topology=SMALL, **AUDIT)
    in_file, held = new_uuid(), new_uuid()
    guests.plant(first, in_file)  # written to the guests' file beside the claim store
    first.close()
    # The hypervisor already runs another guest when the next tracker opens the same store.
    driver = FakeDriver(SMALL)
    driver.plant_guest(Guest(held, STOPPED))
    tracker = hosts(first.host, driver=driver, **AUDIT)
    assert set(driver.guests()) == {in_file, held} and driver.guests()[held].state == STOPPED
    report = tracker.audit(heal=False)
    assert {f.instance_uuid for f in report.of_kind(INSTANCE_WITHOUT_CLAIM)} == {in_file, held}
    # Both are in the file now: a tracker on a driver that knows nothing yet finds them again.
    tracker.close()
    assert set(hosts(first.host, driver=FakeDriver(SMALL), **AUDIT).driver.guests()) == {in_file, held}


def test_a_move_in_flight_is_not_a_finding_on_either_side(placement_service, tmp_path, placement):
    source = Agent(placement_service.url, tmp_path, topology=SMALL, config=AUDIT)
    dest = Agent(placement_service.url, tmp_path, topology=SMALL, config=AUDIT)
    try:
        inst = instance(flavor(1, 512))
        claim = source.client.instance_claim(inst)
        source.client.spawn_guest(inst.uuid, claim.claim_id)
        migration = new_uuid()
        moved = moves.start_move(source.client, dest.client, inst, migration, kind="live_migration")
        # The destination's claim has no guest yet, the source's guest is still there.
        for side in (source, dest):
            assert side.client.audit(heal=False)["consistent"]
        dest.client.migrate_guest(inst.uuid, claim_id=moved.claim_id)
        source.client.migrate_guest(inst.uuid, destination_host=dest.host)
        # The source's outgoing claim has no guest any more: still a move in flight, not an orphan.
        for side in (source, dest):
            report = side.client.audit(heal=True)
            assert report["consistent"] and report["findings"] == [], report["findings"]
        assert source.client.claims_for_instance(inst.uuid)[0].state == "outgoing"
        moves.confirm_move(source.client, dest.client, migration)
        for side in (source, dest):
            assert side.client.audit(heal=False)["consistent"]
        dest.client.delete_instance(inst.uuid)
        assert placement.consumer(inst.uuid).allocations == {}
    finally:
        for side in (source, dest):
            side.stop()


def test_a_guest_whose_claims_were_lost_is_adopted_from_placement(agent, placement):
    client = agent.client
    inst = instance(flavor(2, 1024, 3))
    claim = client.instance_claim(inst)
    client.spawn_guest(inst.uuid, claim.claim_id)
    agent.stop(signal.SIGKILL)
    store = agent.state_dir / f"{agent.host}.sqlite"
    for path in agent.state_dir.glob(f"{agent.host}.sqlite*"):
        if not path.name.endswith(".guests.json") and not path.name.endswith(".lock"):
            path.unlink()  # the claim store is lost; the guests and Placement's books are not
    assert not store.exists()
    agent.start()

    assert [g["uuid"] for g in agent.client.guests()] == [inst.uuid]
    report = agent.client.audit(heal=True)
    assert _findings(report, INSTANCE_WITHOUT_CLAIM)[inst.uuid]["healed"] == "adopted"
    adopted = agent.client.claims_for_instance(inst.uuid)
    assert [c.allocations for c in adopted] == [claim.allocations]
    assert agent.client.audit(heal=False)["consistent"]
    agent.client.delete_instance(inst.uuid)
    agent.client.destroy_guest(inst.uuid)
    assert placement.consumer(inst.uuid).allocations == {}
