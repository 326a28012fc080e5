"""``berth audit`` against a real ``berth serve`` and real agents (their periodic audit and sync
off, so that what a test breaks stays broken until the cloud audit finds it): each finding made for
real through the service's API, found, and healed through the agents where it can be; what no agent
can repair is listed for an operator. The command is run through its Click object."""

from __future__ import annotations

import json
import uuid

import pytest
from agenthelpers import TOKEN, started_agents
from click.testing import CliRunner
from conductorhelpers import BIGGER, HOSTS, PLAIN, assert_books_agree, assert_nothing_left, claims_of, server

from berth.cli.audit import audit_command

pytestmark = pytest.mark.slow


class Killed(BaseException):
    """The conductor's process died here."""


@pytest.fixture(scope="module")
def cloud(placement_service, tmp_path_factory):
    """The conductor tests' three hosts, with no periodic audit or sync of their own."""
    hosts = {name: {"topology": topology, "config": {"audit": {"interval": 0}}} for name, topology in HOSTS.items()}
    with started_agents(placement_service.url, tmp_path_factory, hosts) as agents:
        yield agents


def audit(placement_service, cloud, *options, output="json"):
    """(exit status, the report as JSON or the table as text)."""
    arguments = ["--placement", placement_service.url, "--agent-token", TOKEN, "-f", output]
    arguments += ["--agents", ",".join(agent.url for agent in cloud.values()), *options]
    result = CliRunner().invoke(audit_command, arguments)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, json.loads(result.output) if output == "json" else result.output


def root_of(clients, host):
    return clients[host].capacity()["root_provider_uuid"]


def put_allocations(placement, consumer, held, *, generation=None, consumer_type="INSTANCE"):
    placement.request(
        "PUT",
        f"/allocations/{consumer}",
        {
            "allocations": {rp: {"resources": resources} for rp, resources in held.items()},
            "consumer_generation": generation,
            "project_id": "project",
            "user_id": "user",
            "consumer_type": consumer_type,
        },
    )


def kinds(report):
    return sorted((f["kind"], f.get("consumer_uuid") or f.get("provider_uuid")) for f in report["findings"])


def test_a_clean_cloud_has_nothing_to_report(placement_service, cloud, conductors, placement, clients, instance_uuid):
    conductor = conductors()
    conductor.build(server(instance_uuid))
    status, report = audit(placement_service, cloud)
    assert (status, report["findings"], report["consistent"]) == (0, [], True)
    status, text = audit(placement_service, cloud, output="table")
    assert status == 0 and "nothing found" in text
    conductor.delete(instance_uuid)


def test_builds_and_moves_in_flight_are_not_findings(placement_service, cloud, conductors, placement, clients):
    """A build killed between the scheduler's claim and the agent's holds leased allocations with no
    claim; a resize awaiting confirm holds the migration's allocations on the source. Neither is
    wrong, and healing leaves both as they are."""
    building, resized = str(uuid.uuid4()), str(uuid.uuid4())

    def kill(operation, step):
        if step == "claim":
            raise Killed(step)

    with pytest.raises(Killed):
        conductors(hook=kill).build(server(building))
    leased = placement.consumer(building).allocations
    assert leased and claims_of(clients, building) == {}
    conductor = conductors()
    conductor.build(server(resized))
    moved = conductor.resize(server(resized), BIGGER)

    status, report = audit(placement_service, cloud, "--heal")
    assert (status, report["findings"]) == (0, [])
    assert placement.consumer(building).allocations == leased
    assert placement.consumer(moved.request["migration_uuid"]).allocations

    (undone,) = conductors(dead_after=0).resume()
    assert undone.state == "rolled_back"
    conductor.confirm_resize(moved.id)
    conductor.delete(resized)
    assert_nothing_left(placement, clients, building, resized, moved.request["migration_uuid"])


def test_a_stray_allocation_is_found_and_healed_by_its_hosts_agent(placement_service, cloud, placement, clients):
    stray = str(uuid.uuid4())
    put_allocations(placement, stray, {root_of(clients, "narrow-1"): {"VCPU": 1, "MEMORY_MB": 256}})

    status, report = audit(placement_service, cloud)
    assert status == 1
    # The agent's own "allocations without claim" of it is the same finding, not a second one.
    assert kinds(report) == [("stray_allocations", stray)]
    (finding,) = report["findings"]
    assert finding["healers"] == ["narrow-1"] and "operator" not in finding
    assert placement.consumer(stray).allocations  # found, not yet healed

    status, report = audit(placement_service, cloud, "--heal")
    assert status == 0 and report["consistent"]
    assert [f["healed"] for f in report["findings"]] == [True]
    assert placement.consumer(stray).allocations == {}
    assert_books_agree(placement, clients)


def test_an_instance_on_two_hosts_is_healed_on_the_host_without_its_claim(
    placement_service, cloud, conductors, placement, clients, instance_uuid
):
    conductor = conductors()
    host = conductor.build(server(instance_uuid)).selections["host"]
    other = next(name for name in clients if name != host)
    state = placement.consumer(instance_uuid)
    put_allocations(
        placement,
        instance_uuid,
        {**state.allocations, root_of(clients, other): {"VCPU": 1}},
        generation=state.generation,
    )

    status, report = audit(placement_service, cloud)
    assert status == 1 and kinds(report) == [("instance_on_two_hosts", instance_uuid)]
    (finding,) = report["findings"]
    assert finding["hosts"] == sorted([host, other]) and finding["healers"] == [other]

    status, report = audit(placement_service, cloud, "--heal")
    assert status == 0 and report["findings"][0]["healed"]
    (claim,) = claims_of(clients, instance_uuid)[host]
    assert placement.consumer(instance_uuid).allocations == claim.allocations
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


def test_an_inventory_shrunk_below_its_usage_is_written_back_by_its_agent(
    placement_service, cloud, conductors, placement, clients, instance_uuid
):
    conductor = conductors()
    host = conductor.build(server(instance_uuid)).selections["host"]
    root = root_of(clients, host)
    generation, inventories = placement.get_inventories(root)
    before = inventories["VCPU"]
    # Every VCPU reserved: a capacity of 0 under the instance's 1, which Placement allows.
    placement.set_inventories(root, generation, {**inventories, "VCPU": {**before, "reserved": before["total"]}})

    status, report = audit(placement_service, cloud)
    assert status == 1 and kinds(report) == [("over_capacity", root)]
    (finding,) = report["findings"]
    assert finding["resource_class"] == "VCPU" and finding["healers"] == [host]
    assert "1 VCPU used of a capacity of 0" in finding["detail"]

    status, report = audit(placement_service, cloud, "--heal")
    assert status == 0 and report["findings"][0]["healed"]
    assert "sync" in report["repairs"][host]
    assert placement.get_inventories(root)[1]["VCPU"]["reserved"] == before["reserved"]
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


def test_an_agent_whose_claim_lost_its_allocations_is_healed_by_its_audit(
    placement_service, cloud, conductors, placement, clients, instance_uuid
):
    conductor = conductors()
    host = conductor.build(server(instance_uuid)).selections["host"]
    placement.request("DELETE", f"/allocations/{instance_uuid}")

    status, report = audit(placement_service, cloud)
    assert status == 1
    disagreements = [f for f in report["findings"] if f["kind"] == "claims_disagree"]
    assert [(f["agent_kind"], f["consumer_uuid"], f["hosts"]) for f in disagreements] == [
        ("claim_without_allocations", instance_uuid, [host])
    ]
    assert kinds(report) == [("claims_disagree", instance_uuid)]  # its usage mismatch is the same story

    status, report = audit(placement_service, cloud, "--heal")
    assert status == 0 and all(f["healed"] for f in report["findings"])
    (claim,) = claims_of(clients, instance_uuid)[host]
    assert placement.consumer(instance_uuid).allocations == claim.allocations
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


def test_what_no_agent_answers_for_needs_an_operator(placement_service, cloud, placement, clients):
    """A provider made through the API, no agent's: a stray consumer on it, and its inventory
    shrunk below that consumer's usage. --heal cannot repair either; both are listed, status 1."""
    provider, stray = str(uuid.uuid4()), str(uuid.uuid4())
    placement.create_provider(f"lonely-{provider[:8]}", provider)
    generation = placement.set_inventories(provider, 0, {"VCPU": {"total": 4}})
    put_allocations(placement, stray, {provider: {"VCPU": 3}})
    placement.set_inventories(provider, generation + 1, {"VCPU": {"total": 2}})
    try:
        status, report = audit(placement_service, cloud, "--heal")
        assert status == 1 and not report["consistent"]
        assert kinds(report) == [("over_capacity", provider), ("stray_allocations", stray)]
        assert not any(f.get("healed") for f in report["findings"])
        assert sorted(f["kind"] for f in report["needs_operator"]) == ["over_capacity", "stray_allocations"]
        assert all("no agent" in f["operator"] for f in report["needs_operator"])
        assert placement.consumer(stray).allocations == {provider: {"VCPU": 3}}

        status, text = audit(placement_service, cloud, "--heal", output="table")
        assert status == 1 and "needs an operator" in text and "2 found, 0 healed, 2 left" in text
    finally:
        placement.request("DELETE", f"/allocations/{stray}")
        placement.delete_provider(provider)
    assert audit(placement_service, cloud)[0] == 0


def test_an_agent_that_does_not_answer_is_reported_and_its_host_not_judged(
    placement_service, cloud, conductors, placement, clients, instance_uuid
):
    conductor = conductors()
    host = conductor.build(server(instance_uuid, PLAIN)).selections["host"]
    url = cloud[host].url
    cloud[host].stop()
    try:
        status, report = audit(placement_service, cloud, "--heal")
        assert status == 1
        # The instance's allocations on the silent host are not called stray: its agent may own them.
        assert kinds(report) == [("agent_unreachable", None)]
        (finding,) = report["needs_operator"]
        assert url in finding["detail"] and finding["hosts"] == [url]
    finally:
        cloud[host].start()
        clients[host] = cloud[host].client
    assert audit(placement_service, cloud)[0] == 0
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)
