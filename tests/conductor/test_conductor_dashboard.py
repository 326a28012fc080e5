"""``GET /berth/dashboard/control`` (the control plane for the service's dashboard), the reads under
it, the CORS that lets the service's page read it, and the operations' metrics. Through the real
WSGI application over a real database, service and agents."""

from __future__ import annotations

import threading

import pytest
from conductorhelpers import PLAIN
from prometheus_client.parser import text_string_to_metric_families
from test_control_plane import ended
from werkzeug.test import Client

from berth.conductor.api.app import ApiSettings, create_app
from berth.conductor.control.plane import ControlPlane, Who
from berth.conductor.journal import DONE, FAILED, ROLLED_BACK, RUNNING
from berth.conductor.records.tables import hosts
from berth.conductor.runner import TAKEN_OVER
from berth.scheduler.settings import SelectionSettings

ADMIN = {"X-Auth-Token": "admin"}
WHO = Who("project", "user")
# More memory than any host of the conductors' test cloud has: its build finds no host and fails.
HUGE = {"name": "huge", "vcpus": 1, "ram": 1024 * 1024, "disk": 1}
DASHBOARD = "http://dashboard.example:8778"


class Hold:
    """A step hook that stops builds before ``spawn`` while ``holding`` is set."""

    def __init__(self) -> None:
        self.holding = False
        self.reached = threading.Event()
        self.release = threading.Event()

    def __call__(self, operation, step):
        if self.holding and step == "spawn":
            self.reached.set()
            assert self.release.wait(30)


@pytest.fixture
def hold():
    return Hold()


@pytest.fixture
def plane(placement, cloud, tmp_path, hold):
    made = ControlPlane(
        f"sqlite:///{tmp_path / 'conductor.sqlite'}",
        placement,
        selection=SelectionSettings(enabled_filters=[]),
        hook=hold,
    )
    for name, agent in sorted(cloud.items()):
        made.register_host(name, agent.url, "zone-1", agent.token, "agent", admin=False)
    made.flavors.create({"name": PLAIN.name, "vcpus": 1, "ram": 512, "disk": 1})
    made.flavors.create(HUGE)
    yield made
    hold.release.set()
    made.close()


@pytest.fixture
def web(plane):
    return Client(create_app(plane))


def _build(plane, flavor=PLAIN.name, name="vm"):
    [build] = plane.create_servers(WHO, name=name, flavor_ref=flavor)
    return ended(plane, build.id)


def _silence(plane, name):
    """The host's agent last beat an hour ago, as one that stopped would have."""
    with plane.journal.engine.begin() as conn:
        conn.execute(hosts.update().where(hosts.c.name == name).values(heartbeat=hosts.c.heartbeat - 3600))


def test_the_control_plane_shows_failures_hosts_up_and_down_and_servers_per_host(plane, web):
    built = _build(plane)
    assert built.state == DONE
    failed = _build(plane, HUGE["name"], name="too-big")
    assert failed.state in (FAILED, ROLLED_BACK) and failed.error
    plane.register_host("ghost", "http://127.0.0.1:9", "zone-2", None, "agent", admin=False)
    _silence(plane, "ghost")
    plane.hosts.set_disabled("ghost", True, "dead disk")

    answer = web.get("/berth/dashboard/control", headers=ADMIN)
    assert answer.status_code == 200 and answer.headers["cache-control"] == "no-cache"
    control = answer.get_json()

    host_of_vm = plane.servers.get(built.instance_uuid)["host"]
    shown = {h["name"]: h for h in control["hosts"]}
    assert set(shown) == {h.name for h in plane.hosts.all()} and "ghost" in shown
    assert {name: h["servers"] for name, h in shown.items()} == {
        h.name: (1 if h.name == host_of_vm else 0) for h in plane.hosts.all()
    }
    assert shown["ghost"]["state"] == "down" and shown["ghost"]["status"] == "disabled"
    assert shown["ghost"]["disabled_reason"] == "dead disk" and shown["ghost"]["last_heartbeat_seconds_ago"] >= 3600
    assert shown["ghost"]["zone"] == "zone-2"
    assert all(h["state"] == "up" and h["status"] == "enabled" for n, h in shown.items() if n != "ghost")

    [failure] = control["failures"]
    assert failure["id"] == failed.id and failure["kind"] == "build"
    assert failure["server_id"] == failed.instance_uuid and failure["error"] == failed.error
    assert failure["state"] == failed.state and failure["ended"].endswith("Z")
    assert control["running"] == []
    assert control["totals"] == {
        "servers": 2,
        "servers_by_status": {"ACTIVE": 1, "ERROR": 1},
        "hosts_up": len(shown) - 1,
        "hosts_down": 1,
        "hosts_disabled": 1,
        "operations_running": 0,
    }


def test_an_operation_in_flight_is_shown_with_its_step_and_conductor(plane, web, hold):
    hold.holding = True
    [build] = plane.create_servers(WHO, name="held", flavor_ref=PLAIN.name)
    assert hold.reached.wait(30)
    control = web.get("/berth/dashboard/control", headers=ADMIN).get_json()
    [running] = control["running"]
    assert running["id"] == build.id and running["kind"] == "build" and running["server_id"] == build.instance_uuid
    # Stopped before spawn: the schedule is the last step written (the claim's record goes with
    # the spawn's write).
    assert running["step"] == "schedule" and running["owner"] == plane.conductor.runner.owner
    assert running["started"].endswith("Z")
    assert control["totals"]["operations_running"] == 1
    assert control["totals"]["servers_by_status"] == {"BUILD": 1}
    hold.release.set()
    assert ended(plane, build.id).state == DONE


def test_only_the_admin_reads_the_control_plane(web):
    assert web.get("/berth/dashboard/control").status_code == 401
    refused = web.get("/berth/dashboard/control", headers={"X-Auth-Token": "u:p"})
    assert refused.status_code == 403 and refused.get_json()["errors"][0]["code"]
    service = web.get("/berth/dashboard/control", headers={"X-Auth-Token": "agent:svc", "X-Roles": "service"})
    assert service.status_code == 403


def test_the_failures_are_the_latest_twenty_that_ended_badly_latest_first(plane):
    for index in range(3):
        _build(plane, HUGE["name"], name=f"bad-{index}")
    _build(plane)
    latest = plane.journal.ended((FAILED, ROLLED_BACK), 2)
    every = plane.journal.ended((FAILED, ROLLED_BACK), 20)
    assert len(every) == 3 and latest == every[:2]
    assert [op.updated_at for op in every] == sorted((op.updated_at for op in every), reverse=True)
    assert all(op.state in (FAILED, ROLLED_BACK) for op in every)
    assert [op.state for op in plane.journal.ended((DONE,), 20)] == [DONE]
    assert plane.journal.ended((RUNNING,), 20) == []
    assert plane.servers.count_by_status() == {"ERROR": 3, "ACTIVE": 1}


def _preflight(web, origin):
    return web.open(
        "/berth/dashboard/control",
        method="OPTIONS",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "x-auth-token",
        },
    )


def test_cors_answers_the_allowed_origin_only(plane):
    web = Client(create_app(plane, ApiSettings(cors_allowed_origins=(DASHBOARD,))))
    allowed = _preflight(web, DASHBOARD)
    assert allowed.status_code == 200
    assert allowed.headers["Access-Control-Allow-Origin"] == DASHBOARD
    assert "X-Auth-Token".lower() in allowed.headers["Access-Control-Allow-Headers"].lower()
    answer = web.get("/berth/dashboard/control", headers={**ADMIN, "Origin": DASHBOARD})
    assert answer.status_code == 200 and answer.headers["Access-Control-Allow-Origin"] == DASHBOARD

    other = "http://elsewhere.example"
    assert "Access-Control-Allow-Origin" not in _preflight(web, other).headers
    answer = web.get("/berth/dashboard/control", headers={**ADMIN, "Origin": other})
    assert "Access-Control-Allow-Origin" not in answer.headers
    # Without the setting, no origin is allowed.
    plain = Client(create_app(plane))
    assert "Access-Control-Allow-Origin" not in _preflight(plain, DASHBOARD).headers


def _samples(web):
    text = web.get("/metrics", headers=ADMIN).get_data(as_text=True)
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def test_the_metrics_give_each_kind_and_outcome_its_count_and_durations(plane, web, hold):
    _build(plane)
    failed = _build(plane, HUGE["name"], name="too-big")
    hold.holding = True
    [held] = plane.create_servers(WHO, name="held", flavor_ref=PLAIN.name)
    assert hold.reached.wait(30)
    samples = _samples(web)

    def value(name, **labels):
        found = [s.value for s in samples if s.name == name and s.labels == labels]
        assert len(found) == 1, (name, labels, found)
        return found[0]

    assert value("berth_conductor_operations_total", kind="build", state="done") == 1
    assert value("berth_conductor_operations_total", kind="build", state=failed.state) == 1
    # A running operation is in the gauge alone: the counter never counts what will end otherwise.
    assert not [s for s in samples if s.name == "berth_conductor_operations_total" and s.labels["state"] == RUNNING]
    assert value("berth_conductor_operations_running", kind="build") == 1
    duration = "berth_conductor_operation_duration_seconds"
    assert value(f"{duration}_count", kind="build", state="done") == 1
    done_seconds = value(f"{duration}_sum", kind="build", state="done")
    assert 0 < done_seconds < 60
    buckets = [s for s in samples if s.name == f"{duration}_bucket" and s.labels["state"] == "done"]
    counts = [s.value for s in buckets]
    assert counts == sorted(counts) and counts[-1] == 1 and buckets[-1].labels["le"] == "+Inf"
    # The build lies in the first bucket at or above its duration, and in none below.
    first = next(s for s in buckets if float(s.labels["le"]) >= done_seconds)
    assert first.value == 1
    assert all(s.value == 0 for s in buckets if float(s.labels["le"]) < done_seconds)
    assert value("berth_conductor_takeovers_total", kind="build") == 0
    hold.release.set()
    assert ended(plane, held.id).state == DONE


def test_the_metrics_count_each_kinds_reschedules_and_take_overs(plane, web):
    # No host has room: the scheduler finds none, and no host was tried after another refused.
    failed = _build(plane, HUGE["name"], name="too-big")
    assert failed.attempts and all(a["host"] is None for a in failed.attempts), failed.attempts
    quiet = _build(plane)
    assert quiet.attempts == []
    samples = _samples(web)
    assert [s.value for s in samples if s.name == "berth_conductor_takeovers_total"] == [0]
    # As a conductor taking it over from a dead one writes it (twice over).
    quiet.selections[TAKEN_OVER] = 2
    plane.journal.save(quiet)
    samples = _samples(web)
    reschedules = {s.labels["kind"]: s.value for s in samples if s.name == "berth_conductor_reschedules_total"}
    takeovers = {s.labels["kind"]: s.value for s in samples if s.name == "berth_conductor_takeovers_total"}
    assert reschedules == {"build": 0}
    assert takeovers == {"build": 2}
