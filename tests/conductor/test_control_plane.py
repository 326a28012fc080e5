"""The conductors as a service, without HTTP: servers made and changed through ``ControlPlane``
against a real service and real agents, each action answered once journaled, the servers' rows
agreeing with the books at the end of each operation, one operation at a time per server."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from conductorhelpers import BIGGER, PLAIN, assert_books_agree, claims_of, ended

from berth.conductor.control.plane import ControlPlane, ControlSettings, Who
from berth.conductor.errors import InvalidState, Refused, ServerBusy
from berth.conductor.journal import DONE
from berth.conductor.records import server_states
from berth.conductor.records.hosts import HostEntry, RegisteredByAnother
from berth.conductor.runner import ConductorConfig
from berth.domain.errors import BadRequest, NotFound
from berth.scheduler.settings import SelectionSettings

WHO = Who("project", "user")


@pytest.fixture
def hold():
    """A step hook that stops operations before the named step until released."""

    class Hold:
        step: str | None = None
        reached = threading.Event()
        release = threading.Event()

        def __call__(self, operation, step):
            if step == self.step:
                self.reached.set()
                assert self.release.wait(30)

    return Hold()


@pytest.fixture
def plane(placement, cloud, tmp_path, hold):
    made = ControlPlane(
        f"sqlite:///{tmp_path / 'conductor.sqlite'}",
        placement,
        selection=SelectionSettings(enabled_filters=[]),
        conductor_config=ConductorConfig(heartbeat_interval=0.2),
        settings=ControlSettings(housekeeping_interval=0.5),
        hook=hold,
    )
    for index, (name, agent) in enumerate(sorted(cloud.items())):
        made.register_host(name, agent.url, f"zone-{index % 2}", agent.token, "agent-user", admin=False)
    made.flavors.create({"name": PLAIN.name, "vcpus": PLAIN.vcpus, "ram": PLAIN.memory_mb, "disk": PLAIN.root_gb})
    made.flavors.create({"name": BIGGER.name, "vcpus": BIGGER.vcpus, "ram": BIGGER.memory_mb, "disk": BIGGER.root_gb})
    made.start()
    yield made
    hold.release.set()
    made.close()


def test_a_server_is_built_resized_confirmed_and_deleted_with_its_row_following(plane, placement, clients):
    [build] = plane.create_servers(WHO, name="web", flavor_ref=PLAIN.name)
    server_id = build.instance_uuid
    assert plane.servers.get(server_id)["operation_id"] == build.id
    assert ended(plane, build.id).state == DONE
    row = plane.servers.get(server_id)
    assert (row["status"], row["operation_id"], row["name"]) == (server_states.ACTIVE, None, "web")
    assert set(claims_of(clients, server_id)) == {row["host"]}

    resize = plane.act(server_id, "resize", {"flavor": BIGGER})
    assert ended(plane, resize.id).state == DONE
    row = plane.servers.get(server_id)
    assert row["status"] == server_states.VERIFY_RESIZE and row["move_id"] == resize.id
    assert row["request"]["flavor"]["name"] == BIGGER.name
    assert row["old_request"]["flavor"]["name"] == PLAIN.name

    confirm = plane.act(server_id, "confirmResize")
    assert ended(plane, confirm.id).state == DONE
    row = plane.servers.get(server_id)
    assert (row["status"], row["move_id"], row["old_request"]) == (server_states.ACTIVE, None, None)
    assert set(claims_of(clients, server_id)) == {row["host"]}
    assert_books_agree(placement, clients)

    deleted = plane.delete(server_id)
    assert ended(plane, deleted.id).state == DONE
    with pytest.raises(NotFound):
        plane.servers.get(server_id)
    assert plane.servers.get(server_id, deleted=True)["status"] == server_states.DELETED
    assert placement.consumer(server_id).allocations == {}


def test_deleting_a_server_awaiting_its_resizes_confirmation_confirms_it_first(plane, placement, clients):
    """As Nova does: the move is confirmed (its source's side goes), then the server is deleted;
    the caller is told of the delete's operation."""
    [build] = plane.create_servers(WHO, name="short-lived", flavor_ref=PLAIN.name)
    server_id = build.instance_uuid
    ended(plane, build.id)
    resize = plane.act(server_id, "resize", {"flavor": BIGGER})
    assert ended(plane, resize.id).state == DONE
    assert plane.servers.get(server_id)["status"] == server_states.VERIFY_RESIZE
    assert len(claims_of(clients, server_id)) in (1, 2)  # the old claim and the new, maybe on one host

    deleted = plane.delete(server_id)
    assert deleted.kind == "delete"
    assert ended(plane, deleted.id).state == DONE
    (confirmed,) = [o for o in plane.journal.for_instance(server_id) if o.kind == "confirm_resize"]
    assert confirmed.state == DONE and confirmed.request["move"] == resize.id
    assert plane.servers.get(server_id, deleted=True)["status"] == server_states.DELETED
    assert claims_of(clients, server_id) == {}
    assert placement.consumer(server_id).allocations == {}
    assert placement.consumer(resize.request["migration_uuid"]).allocations == {}
    assert_books_agree(placement, clients)


def test_a_revert_puts_the_old_flavor_and_host_back(plane, placement, clients):
    [build] = plane.create_servers(WHO, name="db", flavor_ref=PLAIN.name)
    ended(plane, build.id)
    before = plane.servers.get(build.instance_uuid)
    resize = plane.act(build.instance_uuid, "resize", {"flavor": BIGGER})
    ended(plane, resize.id)
    revert = plane.act(build.instance_uuid, "revertResize")
    assert ended(plane, revert.id).state == DONE
    after = plane.servers.get(build.instance_uuid)
    assert (after["status"], after["host"]) == (server_states.ACTIVE, before["host"])
    assert after["request"]["flavor"]["name"] == PLAIN.name
    assert_books_agree(placement, clients)
    ended(plane, plane.delete(build.instance_uuid).id)


def test_a_second_action_while_one_runs_is_refused_and_writes_nothing(plane, hold):
    [build] = plane.create_servers(WHO, name="busy", flavor_ref=PLAIN.name)
    ended(plane, build.id)
    hold.step = "shelve"
    shelve = plane.act(build.instance_uuid, "shelve")
    assert hold.reached.wait(30)
    journaled = len(plane.journal.for_instance(build.instance_uuid))
    with pytest.raises(ServerBusy):
        plane.act(build.instance_uuid, "migrate")
    assert len(plane.journal.for_instance(build.instance_uuid)) == journaled
    hold.release.set()
    assert ended(plane, shelve.id).state == DONE
    assert plane.servers.get(build.instance_uuid)["status"] == server_states.SHELVED
    with pytest.raises(InvalidState):
        plane.act(build.instance_uuid, "resize", {"flavor": BIGGER})
    ended(plane, plane.delete(build.instance_uuid).id)


def test_the_slot_is_taken_atomically_at_the_operations_start(plane, hold):
    """Two conductors (or threads) that both read the server as free: only one operation starts."""
    [build] = plane.create_servers(WHO, name="race", flavor_ref=PLAIN.name)
    ended(plane, build.id)
    hold.step = "shelve"
    outcomes: list[object] = []

    def shelve():
        try:
            outcomes.append(plane.act(build.instance_uuid, "shelve"))
        except ServerBusy as e:
            outcomes.append(e)

    threads = [threading.Thread(target=shelve) for _ in range(4)]
    for t in threads:
        t.start()
    assert hold.reached.wait(30)
    hold.release.set()
    for t in threads:
        t.join()
    assert sum(not isinstance(o, ServerBusy) for o in outcomes) == 1
    assert len([op for op in plane.journal.for_instance(build.instance_uuid) if op.kind == "shelve"]) == 1


def test_a_build_no_host_can_take_ends_in_error_with_its_fault(plane):
    plane.flavors.create({"name": "huge", "vcpus": 64, "ram": 1024, "disk": 1})
    [build] = plane.create_servers(WHO, name="huge", flavor_ref="huge")
    assert ended(plane, build.id).state != DONE
    row = plane.servers.get(build.instance_uuid)
    assert row["status"] == server_states.ERROR and "No valid host" in row["fault"]
    ended(plane, plane.delete(build.instance_uuid).id)
    assert plane.servers.get(build.instance_uuid, deleted=True)["status"] == server_states.DELETED


def test_servers_in_a_zone_land_on_its_hosts(plane):
    zone_hosts = {h.name for h in plane.hosts.all() if h.zone == "zone-1"}
    [build] = plane.create_servers(WHO, name="zoned", flavor_ref=PLAIN.name, zone="zone-1")
    assert ended(plane, build.id).state == DONE
    assert plane.servers.get(build.instance_uuid)["host"] in zone_hosts
    with pytest.raises(BadRequest):
        plane.create_servers(WHO, name="nowhere", flavor_ref=PLAIN.name, zone="no-such-zone")
    ended(plane, plane.delete(build.instance_uuid).id)


def test_a_disabled_host_takes_no_new_server(plane, placement):
    names = sorted(h.name for h in plane.hosts.all())
    for name in names[1:]:
        plane.set_host_disabled(name, True, "maintenance")
    try:
        builds = plane.create_servers(WHO, name="pinned", flavor_ref=PLAIN.name, count=2)
        for build in builds:
            assert ended(plane, build.id).state == DONE
            assert plane.servers.get(build.instance_uuid)["host"] == names[0]
        root = placement.find_provider(names[1])["uuid"]
        assert "COMPUTE_STATUS_DISABLED" in placement.get_traits(root)[1]
    finally:
        for name in names[1:]:
            plane.set_host_disabled(name, False)
    assert all(not h.disabled for h in plane.hosts.all())
    for build in builds:
        ended(plane, plane.delete(build.instance_uuid).id)


def test_an_unknown_server_or_flavor_is_refused(plane):
    with pytest.raises(NotFound):
        plane.act(str(uuid.uuid4()), "shelve")
    with pytest.raises(NotFound):
        plane.create_servers(WHO, name="x", flavor_ref="no-such-flavor")


def test_many_registrations_that_change_nothing_are_heartbeats_and_the_others_registrations(plane, cloud):
    registered = {h.name: h for h in plane.hosts.all()}
    time.sleep(1.1)
    same = {n: HostEntry(h.url, h.zone, h.agent_token) for n, h in registered.items()}
    beaten, made = plane.register_hosts(same, "agent-user", admin=False)
    assert (beaten, made) == (set(registered), [])
    assert all(h.silent_for < 1.0 for h in plane.hosts.all())

    [moved, *_] = sorted(registered)
    changed = {**same, moved: same[moved]._replace(zone="zone-moved")}
    beaten, made = plane.register_hosts(changed, "agent-user", admin=False)
    assert beaten == set(registered) - {moved}
    assert [(h.name, h.zone) for h in made] == [(moved, "zone-moved")]
    assert "zone-moved" in plane.zones
    plane.register_hosts(same, "agent-user", admin=False)
    assert plane.hosts.get(moved).zone == registered[moved].zone


def test_many_registrations_refuse_a_host_another_user_registered(plane):
    name, host = next(iter((h.name, h) for h in plane.hosts.all()))
    with pytest.raises(RegisteredByAnother):
        plane.register_hosts({name: HostEntry(host.url, host.zone, host.agent_token)}, "someone-else", admin=False)
    beaten, _ = plane.register_hosts({name: HostEntry(host.url, host.zone, host.agent_token)}, "admin", admin=True)
    assert beaten == {name}


def test_an_operation_that_fails_and_cannot_be_undone_is_left_for_a_resume_not_held_for_ever(plane):
    """Its undo failing too (the source's agent away, say), an operation would stay running under its
    live conductor, whose heartbeat keeps every other conductor from taking it over."""

    def fails_and_is_not_undone(runner):
        runner.start("clean_up_evacuated", str(uuid.uuid4()), {"evacuation": str(uuid.uuid4())})
        raise RuntimeError("the undo could not reach the host")

    started = plane.background.start(fails_and_is_not_undone)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        current = plane.journal.get(started.id)
        if current.owner != plane.conductor.owner and "could not reach the host" in (current.error or ""):
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"operation still held by its conductor: {current}")


class FailAt:
    """A step hook that fails operations (an ordinary error, as a host that does not answer raises)
    before the named step, until told to stop."""

    def __init__(self, step):
        self.step = step

    def __call__(self, operation, step):
        if step == self.step:
            raise RuntimeError(f"host unreachable before {step}")


@pytest.mark.parametrize("failing_step", ["destroy_source_guest", "confirm_source"])
def test_a_delete_whose_confirmation_fails_is_refused_with_why_and_deletes_nothing(
    plane, placement, clients, failing_step
):
    """The confirmation a delete starts with fails (before any of its steps, or after one, when it
    is left for the conductors to finish): the delete is refused (409, not a 500) saying why, and
    the server is deleted when asked again."""
    [build] = plane.create_servers(WHO, name="awaiting", flavor_ref=PLAIN.name)
    server_id = build.instance_uuid
    ended(plane, build.id)
    resize = plane.act(server_id, "resize", {"flavor": BIGGER})
    assert ended(plane, resize.id).state == DONE
    if resize.request["source"] == plane.journal.get(resize.id).selections["dest"] and failing_step != "confirm_source":
        failing_step = "confirm_source"  # a move on one host confirms in one step

    runner = plane.conductor.runner
    runner.hook = FailAt(failing_step)
    with pytest.raises(Refused) as refused:
        plane.delete(server_id)
    runner.hook = None
    message = str(refused.value)
    (confirm,) = [o for o in plane.journal.for_instance(server_id) if o.kind == "confirm_resize"]
    assert f"Server {server_id} awaits the confirmation of its resize" in message
    assert confirm.id in message and "Nothing was deleted" in message
    assert f"host unreachable before {failing_step}" in message
    assert not [o for o in plane.journal.for_instance(server_id) if o.kind == "delete"]
    assert placement.consumer(server_id).allocations != {}

    if failing_step == "destroy_source_guest":
        assert "failed" in message and plane.journal.get(confirm.id).state == "failed"
    else:
        assert "left for the conductors to finish" in message
        assert ended(plane, confirm.id).state == DONE  # a resume finished it
    deleted = plane.delete(server_id)
    assert ended(plane, deleted.id).state == DONE
    assert plane.servers.get(server_id, deleted=True)["status"] == server_states.DELETED
    assert placement.consumer(server_id).allocations == {}
    assert placement.consumer(resize.request["migration_uuid"]).allocations == {}
    assert_books_agree(placement, clients)


def test_the_compute_nodes_read_for_the_scheduler_name_the_hosts_of_servers(plane, placement, cloud):
    """A conductor reads every compute node for its scheduler (the nodes no agent registered are
    left out); the same read tells the lookup of a server's host their roots, which it then finds
    without reading the root's tree."""
    from httphelpers import RecordingHttp

    host = sorted(cloud)[0]
    assert host not in plane.scheduler_config.unknown_hosts  # the compute nodes read by now
    consumer = str(uuid.uuid4())
    root = placement.find_provider(host)["uuid"]
    body = {"allocations": {root: {"VCPU": 1}}, "generation": None, "project_id": "p", "user_id": "u"}
    placement.write_consumers({consumer: {**body, "consumer_type": "INSTANCE"}})
    calls = plane.conductor.runner.calls
    recorded = calls.placement.http = RecordingHttp(placement.url, placement.headers)
    try:
        assert calls.host_of(consumer) == host
        assert recorded.sent == [("GET", f"/allocations/{consumer}")]
    finally:
        placement.request("DELETE", f"/allocations/{consumer}")


def test_a_delete_that_fails_after_a_step_leaves_its_server_in_error_to_be_deleted_again(plane, placement, clients):
    """Nothing of a delete is undone: one that failed once its guest was destroyed leaves a server
    that no longer runs, shown in ERROR with why (as Nova leaves it), not ACTIVE; deleted again, it
    is gone."""
    [build] = plane.create_servers(WHO, name="doomed", flavor_ref=PLAIN.name)
    server_id = build.instance_uuid
    ended(plane, build.id)
    plane.conductor.runner.hook = FailAt("release_host")
    failed = ended(plane, plane.delete(server_id).id)
    plane.conductor.runner.hook = None
    assert (failed.state, failed.step) == ("failed", "destroy")
    row = plane.servers.get(server_id)
    assert (row["status"], row["fault"]) == (server_states.ERROR, "host unreachable before release_host")
    deleted = plane.delete(server_id)
    assert ended(plane, deleted.id).state == DONE
    assert plane.servers.get(server_id, deleted=True)["status"] == server_states.DELETED
    assert placement.consumer(server_id).allocations == {}
    assert_books_agree(placement, clients)
