"""``berth agent`` processes next to a real ``berth serve``, driven over HTTP as a conductor would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid

import pytest
import requests
from agenthelpers import TOKEN, assert_remote_books_agree, two_agents
from trackerhelpers import flavor, instance, new_uuid

from berth.clients.agent import AgentClient
from berth.clients.errors import AgentError, ClaimFailed, ClaimNotFound, InvalidRequest
from berth.domain.host.records import ACTIVE, INCOMING, OUTGOING, SOFT_DELETED
from berth.domain.host.request import PciRequest
from berth.tracker.moving import moves


@pytest.fixture(scope="module")
def agents(placement_service, tmp_path_factory):
    with two_agents(placement_service.url, tmp_path_factory.mktemp("agents")) as pair:
        yield pair


def test_a_conductor_claims_moves_and_releases_through_two_agents(agents, placement):
    a, b = (agent.client for agent in agents)
    inst = instance(flavor(2, 2048, 10, pci=(PciRequest(1, resource_class="SRIOV_NET_VF"),)))
    claim = a.instance_claim(inst)
    assert claim.state == ACTIVE and claim.pci[0].resource_class == "SRIOV_NET_VF"
    assert set(placement.consumer(inst.uuid).allocations) == set(claim.allocations)
    with pytest.raises(ClaimFailed, match="VCPU"):
        a.instance_claim(instance(flavor(32, 512)))
    assert_remote_books_agree(placement, a, b)

    migration = new_uuid()
    moved = moves.start_move(a, b, inst, migration, new_flavor=flavor(4, 2048, 10))
    assert moved.state == INCOMING and moved.migration_context.old_pci == claim.pci
    assert [c.state for c in a.claims_for_instance(inst.uuid)] == [OUTGOING]
    assert placement.consumer(migration).consumer_type == "MIGRATION"
    assert_remote_books_agree(placement, a, b)
    moves.confirm_move(a, b, migration)
    assert a.claims_for_instance(inst.uuid) == []
    assert [c.state for c in b.claims_for_instance(inst.uuid)] == [ACTIVE]
    assert_remote_books_agree(placement, a, b)

    assert [c["state"] for c in b.soft_delete_instance(inst.uuid)] == [SOFT_DELETED]
    b.restore_instance(inst.uuid)
    assert b.delete_instance(inst.uuid) == ["deleted"]
    assert placement.consumer(inst.uuid).allocations == {}

    with pytest.raises(RuntimeError), b.instance_claim(inst):
        raise RuntimeError("spawn failed")  # the remote claim aborts itself
    assert b.claims_for_instance(inst.uuid) == [] and placement.consumer(inst.uuid).allocations == {}
    assert_remote_books_agree(placement, a, b)


def test_the_agent_api_refuses_what_it_should(agents):
    agent = agents[0]
    assert requests.get(agent.url + "/claims", timeout=5).status_code == 401
    assert requests.get(agent.url + "/claims", headers={"X-Auth-Token": "wrong"}, timeout=5).status_code == 401
    with pytest.raises(ClaimNotFound):
        agent.client.get_claim(new_uuid())
    with pytest.raises(ClaimNotFound):
        agent.client.begin_move_out(new_uuid(), new_uuid())
    bad = requests.post(agent.url + "/claims/instance", data=b"not json", headers={"X-Auth-Token": TOKEN}, timeout=5)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "claim.invalid_request"
    with pytest.raises(ClaimFailed, match="PCPU: this host has none"):
        agent.client.instance_claim(instance(flavor(1, 512, cpu_policy="dedicated")))
    refused = requests.post(agent.url + "/migrations/x/confirm", headers={"X-Auth-Token": TOKEN}, timeout=5)
    assert refused.status_code == 200 and refused.json() == {"result": []}  # nothing to confirm: harmless
    with pytest.raises(InvalidRequest, match="missing migration_uuid, source, flavor"):
        agent.client._call("POST", "/claims/resize", {"instance": instance().to_dict()})
    with pytest.raises(AgentError) as unknown:
        agent.client._call("GET", "/teleport")
    assert unknown.value.status == 404


def test_agents_killed_mid_migration_lose_nothing(agents, placement):
    src, dst = agents
    inst = instance(flavor(2, 1024, 5))
    src.client.instance_claim(inst)
    migration = new_uuid()
    moved = moves.start_move(src.client, dst.client, inst, migration, new_flavor=flavor(3, 2048, 5))
    before = (src.client.capacity(), dst.client.capacity())

    src.stop(signal.SIGKILL)  # both hosts die without warning
    dst.stop(signal.SIGKILL)
    src.start()
    dst.start()

    assert (src.client.capacity(), dst.client.capacity()) == before
    [incoming] = dst.client.claims_for_instance(inst.uuid)
    assert incoming.record == moved.record  # with its migration context
    assert [c.state for c in src.client.claims_for_instance(inst.uuid)] == [OUTGOING]
    assert_remote_books_agree(placement, src.client, dst.client)
    moves.revert_move(src.client, dst.client, migration)
    assert [c.state for c in src.client.claims_for_instance(inst.uuid)] == [ACTIVE]
    assert placement.consumer(migration).allocations == {}
    assert_remote_books_agree(placement, src.client, dst.client)
    src.client.delete_instance(inst.uuid)


def test_agent_once_reports_this_machine(placement_service, placement, tmp_path):
    host = f"linux-{uuid.uuid4().hex[:8]}"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "berth.cli.main",
            "agent",
            "--host",
            host,
            "--placement",
            placement_service.url,
            "--driver",
            "linux",
            "--once",
            "--state-dir",
            str(tmp_path / "state"),
            "--instances-path",
            str(tmp_path / "instances"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    root = report["capacity"]["root_provider_uuid"]
    assert report["audit"]["consistent"]
    assert report["capacity"]["providers"][root]["inventories"]["VCPU"]["total"] == os.cpu_count()
    assert placement.get_provider(root)["name"] == host
    assert placement.get_inventories(root)[1]["VCPU"]["total"] == os.cpu_count()


def _agent_command(placement_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``berth agent --driver fake --placement URL ARGS...`` run to its end."""
    return subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "agent", "--driver", "fake", "--placement", placement_url, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_agent_refuses_a_bad_config_and_a_second_agent_on_the_same_state(agents, placement_service, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("reserverd: {MEMORY_MB: 1}\n")
    done = _agent_command(placement_service.url, "--config", str(bad))
    assert done.returncode == 2 and "reserverd" in done.stderr
    exposed = _agent_command(placement_service.url, "--bind", "0.0.0.0:0")
    assert exposed.returncode == 2 and "without a token" in exposed.stderr

    first = agents[0]
    second = _agent_command(
        placement_service.url,
        "--host",
        first.host,
        "--config",
        str(first.config),
        "--state-dir",
        str(first.state_dir),
        "--once",
    )
    assert second.returncode != 0 and "another agent" in second.stderr


def test_agent_refuses_a_port_another_process_listens_on(agents, placement_service, tmp_path):
    """The server refuses to share the port (Granian binds with SO_REUSEPORT, which would let it):
    the command says so and exits, and the agent already there goes on answering."""
    first = agents[0]
    port = first.url.rsplit(":", 1)[1]
    taken = _agent_command(
        placement_service.url,
        "--host",
        "elsewhere",
        "--bind",
        f"127.0.0.1:{port}",
        "--state-dir",
        str(tmp_path / "state"),
    )
    assert taken.returncode == 1 and "Address already in use" in taken.stderr, taken.stderr
    assert AgentClient(first.url).host == first.host
