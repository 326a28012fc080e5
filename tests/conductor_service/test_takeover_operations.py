"""A conductor killed (kill -9) in the middle of any operation: the other conductor takes it over and
finishes or undoes it, and afterwards the operation is shown ended, the server's state and host agree
with the service's allocations and the agents' claims, the cloud's audit finds nothing, nothing is
left behind (allocations, leases, migration consumers) and a second action on the server is taken."""

from __future__ import annotations

import os
import signal
import time

import pytest
from agenthelpers import assert_remote_books_agree
from livehelpers import run_berth
from servicehelpers import act, build, ended, ensure_flavors, wait_for

pytestmark = pytest.mark.slow

# What each kind of operation leaves the server as, by how it ended.
SETTLED = {"ACTIVE", "VERIFY_RESIZE", "SHELVED", "SHELVED_OFFLOADED", "SOFT_DELETED", "ERROR"}


@pytest.fixture(autouse=True)
def flavors(cloud):
    ensure_flavors(cloud.client())


@pytest.fixture(autouse=True)
def conductors_back(cloud):
    """Every agent quick again and both conductors running after each test."""
    yield
    for agent in cloud.agents.values():
        if agent.process.poll() is None:
            os.killpg(agent.process.pid, signal.SIGCONT)
            agent.client.set_faults(spawn_seconds=0)
    for conductor in cloud.conductors:
        if not conductor.running():
            conductor.start(conductor.port)


def slow_spawns(cloud, seconds: float) -> None:
    for agent in cloud.agents.values():
        agent.client.set_faults(spawn_seconds=seconds)


def providers_of(cloud) -> dict[str, set[str]]:
    return {name: set(agent.client.capacity()["providers"]) for name, agent in cloud.agents.items()}


def guest_on_any(cloud, server_id: str, hosts: set[str]) -> bool:
    return any(
        g.get("uuid") == server_id and g.get("state") == "running"
        for name in hosts
        for g in cloud.agents[name].client.guests()
    )


def pause_agents(cloud, hosts, sig) -> None:
    for name in hosts:
        os.killpg(cloud.agents[name].process.pid, sig)


def kill_at(cloud, operation_id: str, point: str, server_id: str, before_hosts: set[str]) -> None:
    """Kill the first conductor (the one that answered the action) at the given point: "paused"
    expects the agents of ``before_hosts`` stopped (SIGSTOP) before the action, so that its call to
    them is in flight when it dies; they are let go on after."""
    second = cloud.client(1)
    if point in ("paused", "paused_long"):
        time.sleep(1.0)  # the call sent to the stopped agent (the operation still running, below)
        assert second.get(f"/operations/{operation_id}")["operation"]["state"] == "running"
        cloud.conductors[0].kill()
        if point == "paused_long":
            # The agent silent past the conductors' dead_after and host_down_after: the other
            # conductor's resume cannot reach it meanwhile, and tries again.
            time.sleep(6.0)
        pause_agents(cloud, before_hosts, signal.SIGCONT)
        return
    if point == "step":
        wait_for(
            lambda: (
                second.get(f"/operations/{operation_id}")["operation"]["step"]
                or second.get(f"/operations/{operation_id}")["operation"]["state"] != "running"
            ),
            timeout=60,
            what="a step written",
        )
    elif point == "agent_answered":
        # The slow spawn answered (a guest running where there was none): the journal's write next.
        others = set(cloud.agents) - before_hosts
        wait_for(
            lambda: (
                guest_on_any(cloud, server_id, others)
                or second.get(f"/operations/{operation_id}")["operation"]["state"] != "running"
            ),
            timeout=60,
            what="the guest spawned",
        )
    cloud.conductors[0].kill()


def settled(cloud, server_id: str, deleted: bool = False, timeout: float = 90.0) -> dict | None:
    """As ``agrees``, once the clean-ups a host's absence left have run (within ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return agrees(cloud, server_id, deleted)
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def agrees(cloud, server_id: str, deleted: bool = False) -> dict | None:
    """The server (None once deleted) agrees with the books, the claims and the audit."""
    client = cloud.client(1)
    assert not [
        lease for lease in cloud.placement.get("/berth/leases")["leases"] if lease["consumer_uuid"] == server_id
    ]
    providers = providers_of(cloud)
    allocations = cloud.placement.consumer(server_id).allocations
    claims = {name for name, agent in cloud.agents.items() if agent.client.claims_for_instance(server_id)}
    if deleted:
        shown = None
        assert allocations == {} and claims == set()
    else:
        shown = client.get(f"/servers/{server_id}")["server"]
        assert shown["operation"] is None, shown
        assert shown["status"] in SETTLED, shown
        host = shown["OS-EXT-SRV-ATTR:host"]
        if shown["status"] == "SHELVED_OFFLOADED" or host is None:
            assert allocations == {} and claims == set(), (shown, allocations, claims)
        else:
            assert set(allocations) and set(allocations) <= providers[host], (shown, allocations)
            if shown["status"] == "VERIFY_RESIZE":
                # The source's claim and the migration's allocations stay until the confirm or revert.
                assert host in claims and len(claims) <= 2, (shown, claims)
            else:
                assert claims == {host}, (shown, claims)
    # Every consumer on every host is a live server there: no migration consumer left.
    listed = client.get("/servers?all_projects=1&limit=1000")["servers"]
    live = {s["id"]: s["OS-EXT-SRV-ATTR:host"] for s in listed}
    moving = any(s["status"] == "VERIFY_RESIZE" for s in listed)
    for name, rps in providers.items():
        if moving:
            break
        for rp in rps:
            for consumer in cloud.placement.provider_allocations(rp):
                assert live.get(consumer) == name, (name, consumer, live.get(consumer))
    assert_remote_books_agree(cloud.placement, *(a.client for a in cloud.agents.values()))
    agents = ",".join(a.url for a in cloud.agents.values())
    audit = run_berth(
        "audit", "--placement", cloud.placement_server.url, "--agents", agents, "--agent-token", "conductor-secret"
    )
    assert audit.returncode == 0, audit.stdout + audit.stderr
    return shown


def second_step(cloud, operation_id: str) -> bool:
    return bool(cloud.client(1).get(f"/operations/{operation_id}")["operation"]["step"])


def start_action(cloud, server_id: str, action: str, arguments: object) -> dict:
    return cloud.client(0).request("POST", f"/servers/{server_id}/action", {action: arguments})["operation"]


def take_over(cloud, started: dict) -> dict:
    operation = ended(cloud.client(1), started["id"], timeout=150)
    assert operation["state"] in ("done", "failed", "rolled_back"), operation
    return operation


def finish(cloud, server_id: str) -> None:
    """A second action is accepted: the server deleted, nothing left."""
    client = cloud.client(1)
    operation = ended(client, client.request("DELETE", f"/servers/{server_id}")["operation"]["id"], timeout=90)
    assert operation["state"] == "done", operation
    settled(cloud, server_id, deleted=True)


def host_of(cloud, server_id: str) -> str:
    return cloud.client(1).get(f"/servers/{server_id}")["server"]["OS-EXT-SRV-ATTR:host"]


@pytest.mark.parametrize("point", ["answered", "step", "agent_answered", "paused", "paused_long"])
def test_build(cloud, point):
    slow_spawns(cloud, 3.0)
    made = cloud.client(0).request("POST", "/servers", {"server": {"name": f"b-{point}", "flavorRef": "small"}})
    server_id = made["server"]["id"]
    hosts = set(cloud.agents) if point.startswith("paused") else set()
    pause_agents(cloud, hosts, signal.SIGSTOP)
    kill_at(cloud, made["server"]["operation_id"], point, server_id, hosts)
    operation = take_over(cloud, {"id": made["server"]["operation_id"]})
    slow_spawns(cloud, 0)
    shown = settled(cloud, server_id)
    assert shown is not None
    assert shown["status"] == ("ACTIVE" if operation["state"] == "done" else "ERROR"), (shown, operation)
    finish(cloud, server_id)


@pytest.mark.parametrize("point", ["step", "paused_long"])
def test_multi_create(cloud, point):
    slow_spawns(cloud, 3.0)
    made = cloud.client(0).request(
        "POST", "/servers", {"server": {"name": f"m-{point}", "flavorRef": "small", "min_count": 2, "max_count": 3}}
    )
    servers = made["servers"]
    hosts = set(cloud.agents) if point.startswith("paused") else set()
    pause_agents(cloud, hosts, signal.SIGSTOP)
    kill_at(cloud, servers[0]["operation_id"], point, servers[0]["id"], hosts)
    for s in servers:
        take_over(cloud, {"id": s["operation_id"]})
    slow_spawns(cloud, 0)
    for s in servers:
        settled(cloud, s["id"])
    for s in servers:
        finish(cloud, s["id"])


# The fast operations (a delete, a confirm or revert, the life-cycle steps) are over before a kill
# after their answer or a step lands: the conductor is killed while its agent is held instead.
@pytest.mark.parametrize("point", ["paused", "paused_long"])
def test_delete(cloud, point):
    server = build(cloud.client(0), f"d-{point}")
    hosts = {server["OS-EXT-SRV-ATTR:host"]}
    if point in ("paused", "paused_long"):
        pause_agents(cloud, hosts, signal.SIGSTOP)
    started = cloud.client(0).request("DELETE", f"/servers/{server['id']}")["operation"]
    kill_at(cloud, started["id"], point, server["id"], hosts)
    operation = take_over(cloud, started)
    assert operation["state"] == "done", operation
    settled(cloud, server["id"], deleted=True)


MOVES = [
    ("migrate", None, "confirmResize"),
    ("migrate", None, "revertResize"),
    ("os-migrateLive", {"host": None}, None),
]


@pytest.mark.parametrize("point", ["step", "agent_answered", "paused"])
@pytest.mark.parametrize("move", MOVES, ids=["migrate-confirm", "migrate-revert", "live"])
def test_move(cloud, move, point):
    action, arguments, then = move
    server = build(cloud.client(0), f"mv-{point}")
    source = server["OS-EXT-SRV-ATTR:host"]
    slow_spawns(cloud, 3.0)
    if point in ("paused", "paused_long"):
        pause_agents(cloud, {source}, signal.SIGSTOP)
    started = start_action(cloud, server["id"], action, arguments)
    kill_at(cloud, started["id"], point, server["id"], {source})
    operation = take_over(cloud, started)
    slow_spawns(cloud, 0)
    shown = settled(cloud, server["id"])
    assert shown is not None
    if then and shown["status"] == "VERIFY_RESIZE":
        assert operation["state"] == "done"
        assert act(cloud.client(1), server["id"], then)["state"] == "done"
        settled(cloud, server["id"])
    elif operation["state"] != "done":
        assert shown["status"] == "ACTIVE" and shown["OS-EXT-SRV-ATTR:host"] == source, (shown, operation)
    finish(cloud, server["id"])


@pytest.mark.parametrize("point", ["paused", "paused_long"])
@pytest.mark.parametrize("then", ["confirmResize", "revertResize"])
def test_confirm_or_revert_killed(cloud, then, point):
    server = build(cloud.client(0), f"cr-{point}")
    assert act(cloud.client(0), server["id"], "migrate")["state"] == "done"
    slow_spawns(cloud, 3.0)
    hosts = set(cloud.agents)
    if point in ("paused", "paused_long"):
        pause_agents(cloud, hosts, signal.SIGSTOP)
    started = start_action(cloud, server["id"], then, None)
    kill_at(cloud, started["id"], point, server["id"], hosts)
    operation = take_over(cloud, started)
    slow_spawns(cloud, 0)
    shown = settled(cloud, server["id"])
    assert shown is not None
    assert operation["state"] == "done" and shown["status"] == "ACTIVE", (operation, shown)
    if then == "revertResize":
        assert shown["OS-EXT-SRV-ATTR:host"] == server["OS-EXT-SRV-ATTR:host"]
    finish(cloud, server["id"])


LIFECYCLE = [
    ([], "shelve", "SHELVED"),
    (["shelve"], "shelveOffload", "SHELVED_OFFLOADED"),
    (["shelve", "shelveOffload"], "unshelve", "ACTIVE"),
    (["shelve"], "unshelve", "ACTIVE"),
    ([], "rebuild", "ACTIVE"),
    ([], "softDelete", "SOFT_DELETED"),
    (["softDelete"], "restore", "ACTIVE"),
]


@pytest.mark.parametrize("point", ["paused", "paused_long"])
@pytest.mark.parametrize("case", LIFECYCLE, ids=lambda c: "-".join([*c[0], c[1]]))
def test_lifecycle(cloud, case, point):
    before, action, status = case
    server = build(cloud.client(0), f"lc-{point}")
    for step in before:
        assert act(cloud.client(0), server["id"], step)["state"] == "done"
    hosts = {h for h in [host_of(cloud, server["id"])] if h}
    status_before = cloud.client(1).get(f"/servers/{server['id']}")["server"]["status"]
    host_of_before = host_of(cloud, server["id"])
    slow_spawns(cloud, 3.0)
    if point in ("paused", "paused_long"):
        hosts = hosts or set(cloud.agents)
        pause_agents(cloud, hosts, signal.SIGSTOP)
    started = start_action(cloud, server["id"], action, None)
    kill_at(
        cloud,
        started["id"],
        point,
        server["id"],
        hosts if action != "rebuild" or point in ("paused", "paused_long") else set(),
    )
    operation = take_over(cloud, started)
    slow_spawns(cloud, 0)
    shown = settled(cloud, server["id"])
    assert shown is not None
    if operation["state"] == "done":
        assert shown["status"] == status, (shown, operation)
    else:
        assert shown["status"] == status_before and shown["OS-EXT-SRV-ATTR:host"] == host_of_before, shown
    finish(cloud, server["id"])


@pytest.mark.parametrize("point", ["step", "paused"])
def test_evacuate(cloud, point):
    client = cloud.client(0)
    server = build(client, f"ev-{point}")
    source = server["OS-EXT-SRV-ATTR:host"]
    agent = cloud.agents[source]
    agent.stop(sig=9)
    try:
        wait_for(lambda: client.get(f"/hosts/{source}")["host"]["state"] == "down", timeout=60, what="down")
        slow_spawns_up = [a for n, a in cloud.agents.items() if n != source]
        for a in slow_spawns_up:
            a.client.set_faults(spawn_seconds=3.0)
        up = set(cloud.agents) - {source}
        started = start_action(cloud, server["id"], "evacuate", None)
        if point == "paused":
            wait_for(lambda: second_step(cloud, started["id"]), timeout=60, what="the evacuation's schedule")
            pause_agents(cloud, up, signal.SIGSTOP)
        kill_at(cloud, started["id"], point, server["id"], up if point == "paused" else {source})
        operation = take_over(cloud, started)
        for a in slow_spawns_up:
            a.client.set_faults(spawn_seconds=0)
    finally:
        agent.start()
    wait_for(lambda: cloud.client(1).get(f"/hosts/{source}")["host"]["state"] == "up", timeout=60, what="up")
    # The source's clean-up of its old guest and allocations runs once it is back.
    shown = settled(cloud, server["id"])
    assert shown is not None
    if operation["state"] == "done":
        assert shown["status"] == "ACTIVE" and shown["OS-EXT-SRV-ATTR:host"] != source, shown
    finish(cloud, server["id"])
