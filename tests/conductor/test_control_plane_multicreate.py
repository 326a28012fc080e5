"""A multi-create through ``ControlPlane``: the scheduler places the whole gang (at least
``min_count`` of it) before any build is journaled, each build then carrying its destination; a
gang refused leaves no server, no operation, no allocation and no lease behind. Against a real
service and real agents, as tests/conductor/test_control_plane.py runs them."""

from __future__ import annotations

import uuid

import pytest
from conductorhelpers import PLAIN, assert_books_agree, claims_of, lease_of
from test_control_plane import WHO, ended

from berth.conductor.control import plane as plane_module
from berth.conductor.control.plane import ControlPlane, ControlSettings, Who
from berth.conductor.errors import SERVER_NO_VALID_HOST
from berth.conductor.journal import DONE, FAILED
from berth.conductor.records import server_states
from berth.conductor.records.servers import ServerFilter
from berth.conductor.runner import ConductorConfig
from berth.domain.errors import Conflict, Forbidden
from berth.scheduler.settings import SelectionSettings

pytestmark = pytest.mark.slow

ANTI_AFFINITY = ["ServerGroupAntiAffinityFilter"]


@pytest.fixture
def plane(placement, cloud, tmp_path):
    made = ControlPlane(
        f"sqlite:///{tmp_path / 'conductor.sqlite'}",
        placement,
        selection=SelectionSettings(enabled_filters=ANTI_AFFINITY),
        conductor_config=ConductorConfig(heartbeat_interval=0.2),
        settings=ControlSettings(housekeeping_interval=0.5),
    )
    for name, agent in sorted(cloud.items()):
        made.register_host(name, agent.url, None, agent.token, "agent-user", admin=False)
    made.flavors.create({"name": PLAIN.name, "vcpus": PLAIN.vcpus, "ram": PLAIN.memory_mb, "disk": PLAIN.root_gb})
    made.start()
    yield made
    for row in made.servers.all(ServerFilter()):
        ended(made, made.delete(str(row["id"])).id)
    made.close()


@pytest.fixture
def new_uuids(monkeypatch):
    """The instance uuids the plane makes, as it makes them (its own uuid source, recorded)."""
    made: list[str] = []

    class Recorded:
        @staticmethod
        def uuid4():
            new = uuid.uuid4()
            made.append(str(new))
            return new

    monkeypatch.setattr(plane_module, "uuid", Recorded)
    return made


def _anti_affinity_group(plane):
    return plane.groups.create("spread", "anti-affinity", {}, "project", "user")


def test_a_gang_that_fits_is_built_whole_one_host_each(plane, placement, clients):
    builds = plane.create_servers(WHO, name="web", flavor_ref=PLAIN.name, count=3)
    assert len(builds) == 3
    for build in builds:
        assert ended(plane, build.id).state == DONE
        # The build recorded the gang's destination instead of selecting again.
        assert build.request["destination"]["host"] == plane.journal.get(build.id).selections["destinations"][0]["host"]
        row = plane.servers.get(build.instance_uuid)
        assert row["status"] == server_states.ACTIVE
        assert "destination" not in row["request"]
        assert set(claims_of(clients, build.instance_uuid)) == {row["host"]}
        assert lease_of(placement, build.instance_uuid) is None  # confirmed
    assert sorted(plane.servers.get(b.instance_uuid)["name"] for b in builds) == ["web-1", "web-2", "web-3"]
    assert_books_agree(placement, clients)


def test_a_gang_refused_leaves_no_server_operation_allocation_or_lease(plane, placement, new_uuids):
    group = _anti_affinity_group(plane)
    with pytest.raises(Conflict) as raised:
        plane.create_servers(WHO, name="spread", flavor_ref=PLAIN.name, group_id=group, count=4, min_count=4)
    assert raised.value.code == SERVER_NO_VALID_HOST
    assert "fewer than 4 can be placed" in raised.value.detail
    assert "anti-affinity" in raised.value.detail
    assert len(new_uuids) == 4
    assert plane.servers.all(ServerFilter()) == []
    leases = {lease["consumer_uuid"] for lease in placement.get("/berth/leases")["leases"]}
    for instance in new_uuids:
        assert plane.journal.find(instance_uuid=instance) == []
        assert placement.get(f"/allocations/{instance}")["allocations"] == {}
        assert instance not in leases


def test_min_count_met_with_fewer_makes_exactly_those_on_distinct_hosts(plane, placement, clients, new_uuids):
    group = _anti_affinity_group(plane)
    builds = plane.create_servers(WHO, name="spread", flavor_ref=PLAIN.name, group_id=group, count=4, min_count=2)
    assert len(builds) == 3
    hosts = []
    for build in builds:
        assert ended(plane, build.id).state == DONE
        hosts.append(plane.servers.get(build.instance_uuid)["host"])
    assert sorted(hosts) == sorted(clients)
    assert len(plane.servers.all(ServerFilter())) == 3
    [left_out] = set(new_uuids) - {b.instance_uuid for b in builds}
    assert plane.journal.find(instance_uuid=left_out) == []
    assert placement.get(f"/allocations/{left_out}")["allocations"] == {}
    assert lease_of(placement, left_out) is None
    assert_books_agree(placement, clients)


def test_an_anti_affinity_gang_lands_on_distinct_hosts(plane, placement, clients):
    group = _anti_affinity_group(plane)
    builds = plane.create_servers(WHO, name="spread", flavor_ref=PLAIN.name, group_id=group, count=3)
    for build in builds:
        assert ended(plane, build.id).state == DONE
    assert sorted(plane.servers.get(b.instance_uuid)["host"] for b in builds) == sorted(clients)
    assert_books_agree(placement, clients)


def test_a_gang_over_the_projects_quota_is_forbidden_and_leaves_nothing(plane, placement, new_uuids):
    """As Nova answers a create over quota: 403 with the limit passed, and none of the servers made.
    (A single build over quota fails as its operation, with the same words: the next test.)"""
    owner = Who(f"project-{uuid.uuid4().hex[:8]}", "user")
    placement.request("PUT", f"/berth/quotas/{owner.project_id}", {"limits": {"VCPU": PLAIN.vcpus}})
    try:
        with pytest.raises(Forbidden) as raised:
            plane.create_servers(owner, name="over", flavor_ref=PLAIN.name, count=2)
        assert raised.value.code == "berth.quota.exceeded"
        assert "None of the 2 servers was created" in raised.value.detail
        assert "Quota exceeded for VCPU" in raised.value.detail
        assert plane.servers.all(ServerFilter()) == []
        for instance in new_uuids:
            assert plane.journal.find(instance_uuid=instance) == []
            assert placement.get(f"/allocations/{instance}")["allocations"] == {}
        [build] = plane.create_servers(owner, name="one", flavor_ref=PLAIN.name)
        assert ended(plane, build.id).state == DONE
        [over] = plane.create_servers(owner, name="two", flavor_ref=PLAIN.name)
        failed = ended(plane, over.id)
        assert failed.state == FAILED and failed.error.startswith("Quota exceeded for VCPU of project")
        row = plane.servers.get(over.instance_uuid)
        assert row["status"] == server_states.ERROR and "Quota exceeded" in row["fault"]
        assert placement.get(f"/allocations/{over.instance_uuid}")["allocations"] == {}
    finally:
        placement.request("DELETE", f"/berth/quotas/{owner.project_id}")


def test_a_project_at_its_quota_may_still_be_migrated_and_its_migration_confirmed(plane, placement):
    """Nova checks no quota for a migration: an operator draining a host is not held back by a
    project at its limit (the move's pick counts the instance's holdings as freed)."""
    owner = Who(f"project-{uuid.uuid4().hex[:8]}", "user")
    [build] = plane.create_servers(owner, name="full", flavor_ref=PLAIN.name)
    assert ended(plane, build.id).state == DONE
    placement.request("PUT", f"/berth/quotas/{owner.project_id}", {"limits": {"VCPU": PLAIN.vcpus}})
    try:
        source = plane.servers.get(build.instance_uuid)["host"]
        moved = ended(plane, plane.act(build.instance_uuid, "migrate").id)
        assert moved.state == DONE, moved.error
        assert ended(plane, plane.act(build.instance_uuid, "confirmResize").id).state == DONE
        row = plane.servers.get(build.instance_uuid)
        assert row["status"] == server_states.ACTIVE and row["host"] != source
        usage = placement.get(f"/berth/quotas/{owner.project_id}")["usage"]
        assert usage["VCPU"] == PLAIN.vcpus
    finally:
        placement.request("DELETE", f"/berth/quotas/{owner.project_id}")
        ended(plane, plane.delete(build.instance_uuid).id)
