"""``berth conductor`` as operators run it: two conductor processes on one database, agents that
registered themselves, every request answered by either conductor, the servers' state agreeing
with the books after every operation, a conductor killed in the middle of a resize."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from agenthelpers import assert_remote_books_agree
from livehelpers import free_port, run_berth
from servicehelpers import LARGE, act, build, ended, ensure_flavors, wait_for

from berth.clients.conductor import ConductorError
from berth.conductor.control.host_books import DOWN_FRESH_SECONDS

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def flavors(cloud):
    ensure_flavors(cloud.client())


def books_agree(cloud) -> None:
    assert_remote_books_agree(cloud.placement, *(a.client for a in cloud.agents.values()))


def claims_on(cloud, server_id) -> set[str]:
    return {name for name, agent in cloud.agents.items() if agent.client.claims_for_instance(server_id)}


@contextlib.contextmanager
def host_down(cloud, client, host: str) -> Iterator[Any]:
    """The host's agent killed (kill -9) and the host seen down by the conductors; its agent (the
    value) started again at the end, and, the body ended well, the host seen up again."""
    agent = cloud.agents[host]
    agent.stop(sig=9)
    try:
        wait_for(lambda: client.get(f"/hosts/{host}")["host"]["state"] == "down", what=f"{host} down")
        yield agent
    except BaseException:
        agent.start()
        raise
    agent.start()
    wait_for(lambda: client.get(f"/hosts/{host}")["host"]["state"] == "up", what=f"{host} up")


ZONES = {"alpha": "zone-a", "beta": "zone-a", "gamma": "zone-b"}


def test_the_agents_registered_themselves_with_their_zones(cloud):
    hosts = {h["name"]: h for h in cloud.client(1).get("/hosts")["hosts"]}
    assert {name: h["zone"] for name, h in hosts.items()} == ZONES
    assert all(h["state"] == "up" and h["status"] == "enabled" for h in hosts.values())


def test_a_server_built_on_one_conductor_is_resized_confirmed_and_reverted_through_the_other(cloud):
    first, second = cloud.client(0), cloud.client(1)
    server = build(first, "web")
    assert server["status"] == "ACTIVE" and claims_on(cloud, server["id"]) == {server["OS-EXT-SRV-ATTR:host"]}
    assert server["allocations"]

    resized = act(second, server["id"], "resize", {"flavorRef": LARGE["name"]})
    assert resized["state"] == "done", resized
    shown = first.get(f"/servers/{server['id']}")["server"]
    assert shown["status"] == "VERIFY_RESIZE" and shown["flavor"]["original_name"] == "large"
    assert act(first, server["id"], "confirmResize")["state"] == "done"
    shown = second.get(f"/servers/{server['id']}")["server"]
    assert shown["status"] == "ACTIVE" and claims_on(cloud, server["id"]) == {shown["OS-EXT-SRV-ATTR:host"]}

    assert act(second, server["id"], "resize", {"flavorRef": "small"})["state"] == "done"
    before_revert = first.get(f"/servers/{server['id']}")["server"]
    assert act(first, server["id"], "revertResize")["state"] == "done"
    shown = first.get(f"/servers/{server['id']}")["server"]
    assert shown["flavor"]["original_name"] == "large"
    assert shown["OS-EXT-SRV-ATTR:host"] == before_revert["OS-EXT-SRV-ATTR:host"] or shown["status"] == "ACTIVE"
    books_agree(cloud)

    deleted = first.request("DELETE", f"/servers/{server['id']}")["operation"]
    assert ended(first, deleted["id"])["state"] == "done"
    with pytest.raises(ConductorError) as gone:
        second.get(f"/servers/{server['id']}")
    assert gone.value.status == 404 and gone.value.code == "berth.server.not_found"
    assert cloud.placement.consumer(server["id"]).allocations == {}


def test_a_live_migration_moves_the_server_and_its_claim(cloud):
    client = cloud.client()
    server = build(client, "mover")
    source = server["OS-EXT-SRV-ATTR:host"]
    migrated = act(client, server["id"], "os-migrateLive", {"host": None})
    assert migrated["state"] == "done", migrated
    shown = client.get(f"/servers/{server['id']}")["server"]
    assert shown["status"] == "ACTIVE" and shown["OS-EXT-SRV-ATTR:host"] != source
    assert claims_on(cloud, server["id"]) == {shown["OS-EXT-SRV-ATTR:host"]}
    books_agree(cloud)
    # Asked for no zone, the server is shown in its host's, as Nova shows it, and moves with it.
    assert server["OS-EXT-AZ:availability_zone"] == ZONES[source]
    assert shown["OS-EXT-AZ:availability_zone"] == ZONES[shown["OS-EXT-SRV-ATTR:host"]]
    (listed,) = [s for s in client.get("/servers")["servers"] if s["id"] == server["id"]]
    assert listed["OS-EXT-AZ:availability_zone"] == ZONES[shown["OS-EXT-SRV-ATTR:host"]]
    # Offloaded, on no host, it is shown in the zone of the host it was last on, as Nova shows it.
    for action in ("shelve", "shelveOffload"):
        assert act(client, server["id"], action, None)["state"] == "done"
    offloaded = client.get(f"/servers/{server['id']}")["server"]
    assert offloaded["status"] == "SHELVED_OFFLOADED" and offloaded["OS-EXT-SRV-ATTR:host"] is None
    assert offloaded["OS-EXT-AZ:availability_zone"] == ZONES[shown["OS-EXT-SRV-ATTR:host"]]
    assert act(client, server["id"], "unshelve", None)["state"] == "done"
    back = client.get(f"/servers/{server['id']}")["server"]
    assert back["OS-EXT-AZ:availability_zone"] == ZONES[back["OS-EXT-SRV-ATTR:host"]]
    ended(client, client.request("DELETE", f"/servers/{server['id']}")["operation"]["id"])


def test_a_conductor_killed_in_the_middle_of_a_resize_has_it_finished_or_undone_by_the_other(cloud):
    first, second = cloud.client(0), cloud.client(1)
    server = build(first, "victim")
    for agent in cloud.agents.values():
        agent.client.set_faults(spawn_seconds=3.0)
    try:
        started = first.request("POST", f"/servers/{server['id']}/action", {"resize": {"flavorRef": "large"}})
        operation_id = started["operation"]["id"]
        wait_for(lambda: second.get(f"/operations/{operation_id}")["operation"]["step"], what="a step done")
        cloud.conductors[0].kill()
        operation = ended(second, operation_id, timeout=90)
    finally:
        for agent in cloud.agents.values():
            agent.client.set_faults(spawn_seconds=0)
        cloud.conductors[0].start(cloud.conductors[0].port)
    assert operation["state"] in ("done", "rolled_back", "failed"), operation
    assert operation["owner"] != started["operation"].get("owner")
    shown = second.get(f"/servers/{server['id']}")["server"]
    assert shown["operation"] is None
    if operation["state"] == "done":
        assert shown["status"] == "VERIFY_RESIZE"
        assert act(second, server["id"], "confirmResize")["state"] == "done"
    else:
        assert shown["status"] == "ACTIVE" and shown["flavor"]["original_name"] == "small"
    shown = second.get(f"/servers/{server['id']}")["server"]
    assert claims_on(cloud, server["id"]) == {shown["OS-EXT-SRV-ATTR:host"]}
    books_agree(cloud)
    ended(second, second.request("DELETE", f"/servers/{server['id']}")["operation"]["id"])


def test_a_second_action_on_a_busy_server_is_refused_by_either_conductor(cloud):
    first, second = cloud.client(0), cloud.client(1)
    server = build(first, "busy")
    for agent in cloud.agents.values():
        agent.client.set_faults(spawn_seconds=2.0)
    try:
        started = first.request("POST", f"/servers/{server['id']}/action", {"migrate": None})["operation"]
        for client in (first, second):
            with pytest.raises(ConductorError) as refused:
                client.request("POST", f"/servers/{server['id']}/action", {"shelve": None})
            assert refused.value.status == 409 and refused.value.code == "berth.server.busy"
        assert ended(first, started["id"])["state"] == "done"
    finally:
        for agent in cloud.agents.values():
            agent.client.set_faults(spawn_seconds=0)
    assert act(second, server["id"], "confirmResize")["state"] == "done"
    ended(second, second.request("DELETE", f"/servers/{server['id']}")["operation"]["id"])


def test_the_servers_of_a_host_that_went_down_are_evacuated_and_its_books_cleaned_when_it_is_back(cloud):
    client = cloud.client()
    server = build(client, "evacuee", availability_zone="zone-a")
    host = server["OS-EXT-SRV-ATTR:host"]
    with pytest.raises(ConductorError) as up:
        client.request("POST", f"/hosts/{host}/evacuate")
    assert up.value.status == 409 and up.value.code == "berth.host.up"
    with host_down(cloud, client, host):
        [operation] = client.request("POST", f"/hosts/{host}/evacuate")["operations"]
        assert ended(client, operation["id"])["state"] == "done"
        shown = client.get(f"/servers/{server['id']}")["server"]
        assert shown["status"] == "ACTIVE" and shown["OS-EXT-SRV-ATTR:host"] not in (host, None)
        # While it is down (as every conductor sees it by now), no build is sent to it.
        time.sleep(DOWN_FRESH_SECONDS)
        for index in range(3):
            placed = build(client, f"while-down-{index}", availability_zone="zone-a")
            assert placed["OS-EXT-SRV-ATTR:host"] != host
            [built] = client.get(f"/operations?server_id={placed['id']}&kind=build")["operations"]
            assert built["attempts"] == []
            ended(client, client.request("DELETE", f"/servers/{placed['id']}")["operation"]["id"])
    # The agent drops the old claim itself as it starts; the old guest goes with the conductors' clean-up.
    wait_for(
        lambda: [
            op
            for op in client.get(f"/operations?server_id={server['id']}&kind=clean_up_evacuated&state=done")[
                "operations"
            ]
        ],
        what="the clean-up after the evacuation",
    )
    assert claims_on(cloud, server["id"]) == {shown["OS-EXT-SRV-ATTR:host"]}
    books_agree(cloud)
    ended(client, client.request("DELETE", f"/servers/{server['id']}")["operation"]["id"])


def test_a_host_retired_after_its_servers_were_evacuated_leaves_nothing_counted_against_it(cloud):
    """Its evacuated servers' clean-up waited for it to come back; retired, it will not: the books
    release what they still counted there (the migrations' allocations) and the clean-up is done."""
    client = cloud.client()
    server = build(client, "evacuee-of-retired", availability_zone="zone-a")
    host = server["OS-EXT-SRV-ATTR:host"]
    with host_down(cloud, client, host) as agent:
        [operation] = client.request("POST", f"/hosts/{host}/evacuate")["operations"]
        evacuated = ended(client, operation["id"])
        assert evacuated["state"] == "done", evacuated
        source_root = cloud.placement.find_provider(host)["uuid"]
        assert cloud.placement.get(f"/resource_providers/{source_root}/allocations")["allocations"]
        client.request("DELETE", f"/hosts/{host}")
        assert cloud.placement.get(f"/resource_providers/{source_root}/allocations")["allocations"] == {}
        [clean_up] = client.get(f"/operations?server_id={server['id']}&kind=clean_up_evacuated")["operations"]
        assert clean_up["state"] == "done" and clean_up["steps_done"] == ["release_source_allocations"], clean_up
    # Back (registered anew), it drops the evacuated server's old claim itself as it starts, and
    # the conductors' clean-up removes the old guest there.
    wait_for(
        lambda: server["id"] not in {g["uuid"] for g in agent.client.guests()},
        what="the old guest removed",
    )
    wait_for(
        lambda: (
            claims_on(cloud, server["id"]) == {client.get(f"/servers/{server['id']}")["server"]["OS-EXT-SRV-ATTR:host"]}
        ),
        what="the old claim dropped",
    )
    ended(client, client.request("DELETE", f"/servers/{server['id']}")["operation"]["id"])
    time.sleep(DOWN_FRESH_SECONDS)


def test_an_evacuation_that_finds_no_host_leaves_the_server_in_error_to_be_evacuated_again(cloud):
    """As Nova: the server stays on its dead host, in ERROR with the fault, and may be evacuated
    again once a host can take it."""
    client = cloud.client()
    server = build(client, "stuck", availability_zone="zone-a")
    host = server["OS-EXT-SRV-ATTR:host"]
    [other] = [name for name, zone in ZONES.items() if zone == "zone-a" and name != host]
    client.request("POST", f"/hosts/{other}/disable", {"reason": "full"})
    with host_down(cloud, client, host):
        try:
            failed = act(client, server["id"], "evacuate", {"host": None})
            assert failed["state"] == "failed" and "No valid host" in failed["error"], failed
            shown = client.get(f"/servers/{server['id']}")["server"]
            assert (shown["status"], shown["OS-EXT-STS:vm_state"], shown["OS-EXT-SRV-ATTR:host"]) == (
                "ERROR",
                "error",
                host,
            )
            assert "No valid host" in shown["fault"]["message"]
            held = {rp: a["resources"] for rp, a in server["allocations"].items()}
            assert cloud.placement.consumer(server["id"]).allocations == held  # on its dead host still

            client.request("POST", f"/hosts/{other}/enable")
            again = act(client, server["id"], "evacuate", {"host": None})
            assert again["state"] == "done", again
            shown = client.get(f"/servers/{server['id']}")["server"]
            assert (shown["status"], shown["OS-EXT-SRV-ATTR:host"]) == ("ACTIVE", other)
            assert "fault" not in shown
        finally:
            client.request("POST", f"/hosts/{other}/enable")
    wait_for(
        lambda: client.get(f"/operations?server_id={server['id']}&kind=clean_up_evacuated&state=done")["operations"],
        what="the clean-up after the evacuation",
    )
    assert claims_on(cloud, server["id"]) == {other}
    books_agree(cloud)
    ended(client, client.request("DELETE", f"/servers/{server['id']}")["operation"]["id"])


def test_a_server_on_a_host_that_is_down_is_deleted_and_the_host_cleaned_when_it_is_back(cloud):
    """As Nova deletes a server whose compute service is down: at once, its allocations released
    without asking the host; the guest and the claim the host kept go once it is back."""
    client = cloud.client()
    server = build(client, "stranded", availability_zone="zone-b")
    host = server["OS-EXT-SRV-ATTR:host"]
    with host_down(cloud, client, host) as agent:
        deleted = ended(client, client.request("DELETE", f"/servers/{server['id']}")["operation"]["id"])
        assert deleted["state"] == "done" and deleted["steps_done"] == ["release_allocations"], deleted
        assert cloud.placement.consumer(server["id"]).allocations == {}
        with pytest.raises(ConductorError) as gone:
            client.get(f"/servers/{server['id']}")
        assert gone.value.status == 404
        [waiting] = client.get(f"/operations?server_id={server['id']}&kind=clean_up_deleted")["operations"]
        assert waiting["state"] == "running" and waiting["error"] == f"waiting for host {host} to be up again"
        # Nothing is left on the host as far as the conductors count: it may be retired.
        assert client.get(f"/hosts/{host}")["host"]["servers"] == 0
    wait_for(
        lambda: client.get(f"/operations/{waiting['id']}")["operation"]["state"] == "done",
        what="the clean-up of the host after the delete",
    )
    assert claims_on(cloud, server["id"]) == set()
    assert server["id"] not in {g["uuid"] for g in agent.client.guests()}
    books_agree(cloud)


def test_a_shelved_server_on_a_host_that_is_down_is_offloaded_without_it_and_unshelved_elsewhere(cloud):
    """Its host down, a shelved server is offloaded as a delete is done (its allocations released,
    what the host holds left to a clean-up once it is back), then unshelved on another host; an
    action that needs the host is refused at once, saying what does without it."""
    client = cloud.client()
    server = build(client, "shelved-on-dead", availability_zone="zone-a")
    host = server["OS-EXT-SRV-ATTR:host"]
    assert act(client, server["id"], "shelve")["state"] == "done"
    with host_down(cloud, client, host) as agent:
        with pytest.raises(ConductorError) as refused:
            client.request("POST", f"/servers/{server['id']}/action", {"unshelve": None})
        assert (refused.value.status, refused.value.code) == (409, "berth.host.down")
        assert "shelve-offload" in refused.value.detail
        offloaded = act(client, server["id"], "shelveOffload")
        assert offloaded["state"] == "done" and offloaded["steps_done"] == ["release_allocations"], offloaded
        assert cloud.placement.consumer(server["id"]).allocations == {}
        shown = client.get(f"/servers/{server['id']}")["server"]
        assert (shown["status"], shown["OS-EXT-SRV-ATTR:host"]) == ("SHELVED_OFFLOADED", None)
        [waiting] = client.get(f"/operations?server_id={server['id']}&kind=clean_up_build")["operations"]
        assert waiting["state"] == "running" and waiting["error"] == f"waiting for host {host} to be up again"
        assert act(client, server["id"], "unshelve")["state"] == "done"
        elsewhere = client.get(f"/servers/{server['id']}")["server"]["OS-EXT-SRV-ATTR:host"]
        assert elsewhere not in (None, host)
    wait_for(
        lambda: client.get(f"/operations/{waiting['id']}")["operation"]["state"] == "done",
        what="the clean-up of the host after the offload",
    )
    assert claims_on(cloud, server["id"]) == {elsewhere}
    assert server["id"] not in {g["uuid"] for g in agent.client.guests()}
    books_agree(cloud)
    ended(client, client.request("DELETE", f"/servers/{server['id']}")["operation"]["id"])
    # The conductors' scheduling knows the host up again within this long: the next test's builds
    # may go to it.
    time.sleep(DOWN_FRESH_SECONDS)


def test_a_host_registered_by_one_user_cannot_be_taken_over_by_another(cloud):
    stranger = cloud.client(token="mallory:evil")
    stranger.headers["X-Roles"] = "service"
    with pytest.raises(ConductorError) as refused:
        stranger.request("PUT", "/hosts/alpha", {"host": {"url": "http://127.0.0.1:1", "zone": "zone-a"}})
    assert refused.value.status == 403 and refused.value.code == "berth.host.registered_by_another"
    assert cloud.client().get("/hosts/alpha")["host"]["url"] == cloud.agents["alpha"].url
    anonymous = cloud.client(token="nobody:none")
    with pytest.raises(ConductorError) as forbidden:
        anonymous.request("PUT", f"/hosts/h-{uuid.uuid4().hex[:6]}", {"host": {"url": "http://127.0.0.1:1"}})
    assert forbidden.value.status == 403


def test_a_second_agent_under_a_live_agents_host_name_is_refused_and_the_first_keeps_serving(cloud, tmp_path):
    first = cloud.agents["alpha"]
    state = tmp_path / "state"
    second = run_berth(
        *("agent", "--host", "alpha", "--driver", "fake", "--config", str(first.config)),
        *("--placement", first.placement_url, "--bind", f"127.0.0.1:{free_port()}", "--state-dir", str(state)),
        *("--conductor", ",".join(c.url for c in cloud.conductors), "--zone", "zone-a"),
        timeout=30,
    )
    assert second.returncode == 1, second
    [said] = second.stderr.strip().splitlines()[-1:]
    assert said.startswith(
        "berth agent: another agent already serves host alpha; stop it, or start this one under another --host "
        f"name. The conductors say: Host alpha is held by the agent at {first.url}, whose last heartbeat was"
    ), second.stderr
    # Refused before it reported the host, audited or served: no claim store was even made.
    assert not (state / "alpha.sqlite").exists()
    time.sleep(1.5)  # a few of the first agent's beats
    for index in range(len(cloud.conductors)):
        shown = cloud.client(index).get("/hosts/alpha")["host"]
        assert (shown["url"], shown["state"]) == (first.url, "up")
    assert first.client.capacity()["host"] == "alpha"


WHOLE_HOST = {"vcpus": 4, "ram": 1024, "disk": 1}


def test_a_high_priority_build_on_a_full_cloud_preempts_through_either_conductor(cloud):
    first, second = cloud.client(0), cloud.client(1)
    known = {f["name"] for f in first.get("/flavors")["flavors"]}
    if "whole" not in known:
        first.request("POST", "/flavors", {"flavor": {"name": "whole", **WHOLE_HOST}})
        offload = {"berth:preemption_action": "shelve_offload"}
        first.request("POST", "/flavors", {"flavor": {"name": "whole.offload", **WHOLE_HOST, "extra_specs": offload}})
        first.request(
            "POST", "/flavors", {"flavor": {"name": "whole.hi", **WHOLE_HOST, "extra_specs": {"berth:priority": "10"}}}
        )
    # The cloud filled with servers of priority 0 (the one that finds no room is in ERROR).
    low = []
    for n in range(len(cloud.agents) + 1):
        made = first.request("POST", "/servers", {"server": {"name": f"low-{n}", "flavorRef": "whole.offload"}})
        if ended(first, made["server"]["operation_id"])["state"] != "done":
            break
        low.append(made["server"]["id"])
    else:
        raise AssertionError("the cloud never filled")

    urgent = second.request("POST", "/servers", {"server": {"name": "urgent", "flavorRef": "whole.hi"}})["server"]
    operation = ended(second, urgent["operation_id"])

    assert operation["state"] == "done", operation
    server = first.get(f"/servers/{urgent['id']}")["server"]
    assert server["status"] == "ACTIVE"
    [record] = cloud.placement.get(f"/berth/preemptions?preempted_by={urgent['id']}")["preemptions"]
    victim = first.get(f"/servers/{record['consumer_uuid']}")["server"]
    assert (victim["status"], victim["fault"]["message"]) == ("SHELVED_OFFLOADED", f"preempted by {urgent['id']}")
    assert claims_on(cloud, victim["id"]) == set()
    assert claims_on(cloud, urgent["id"]) == {server["OS-EXT-SRV-ATTR:host"]}
    books_agree(cloud)
    for server_id in [*low, urgent["id"]]:
        ended(first, first.request("DELETE", f"/servers/{server_id}")["operation"]["id"])
    books_agree(cloud)
