"""GET /metrics: counters that move as requests are answered, labelled by route template; conflicts
by error code; the cloud's figures as the API reports them; who may read it; and a real server whose
workers' counts are summed."""

from __future__ import annotations

import os
import re
import time
import urllib.request

from apihelpers import Api, new_uuid
from livehelpers import LiveServer
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import exc

from berth.api.app import PlacementApp, Settings
from berth.domain.capacity import capacity
from berth.web.observability.exposition import forget_dead_processes
from berth.web.observability.multiprocess_dir import hold, remove_orphans


def scrape(api, **kw):
    r = api.get("/metrics", **kw)
    assert r.status_code == 200, r.data
    assert r.headers["Content-Type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(r.data.decode())
        for sample in family.samples
    }


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_requests_are_counted_and_timed_by_route_template(api):
    rp = api.create_provider()
    before = scrape(api)
    for _ in range(3):
        assert api.get(f"/resource_providers/{rp}").status_code == 200
    assert api.get(f"/resource_providers/{new_uuid()}").status_code == 404
    after = scrape(api)
    route = "/resource_providers/{uuid}"
    counted = value(after, "berth_http_requests_total", route=route, method="GET", status="200")
    assert counted - value(before, "berth_http_requests_total", route=route, method="GET", status="200") == 3
    missing = value(after, "berth_http_requests_total", route=route, method="GET", status="404")
    assert missing - value(before, "berth_http_requests_total", route=route, method="GET", status="404") == 1
    timed = value(after, "berth_http_request_duration_seconds_count", route=route, method="GET")
    assert timed - value(before, "berth_http_request_duration_seconds_count", route=route, method="GET") == 4
    assert value(after, "berth_http_request_duration_seconds_bucket", route=route, method="GET", le="+Inf") >= 4
    # No raw path ever becomes a label: a series per provider would grow without end.
    routes = {dict(labels).get("route") for (_, labels) in after if dict(labels).get("route")}
    assert not any(rp in route for route in routes)
    assert all(route == "unmatched" or route.startswith("/") for route in routes)


def test_a_path_no_route_serves_is_counted_as_unmatched(api):
    before = scrape(api)
    assert api.get("/no/such/thing").status_code == 404
    after = scrape(api)
    key = {"route": "unmatched", "method": "GET", "status": "404"}
    assert value(after, "berth_http_requests_total", **key) - value(before, "berth_http_requests_total", **key) == 1


def test_a_request_refused_before_routing_keeps_its_route(api):
    rp = api.create_provider()
    before = scrape(api)
    assert api.get(f"/resource_providers/{rp}", token="").status_code == 401
    after = scrape(api)
    key = {"route": "/resource_providers/{uuid}", "method": "GET", "status": "401"}
    assert value(after, "berth_http_requests_total", **key) - value(before, "berth_http_requests_total", **key) == 1


def test_allocation_conflicts_are_counted_by_code(api):
    rp = api.create_provider(inventory={"VCPU": 4})
    consumer = new_uuid()
    api.allocate(consumer, {rp: {"VCPU": 3}})
    before = scrape(api)
    # Over capacity, and a stale consumer generation: two different codes.
    api.allocate(new_uuid(), {rp: {"VCPU": 3}}, expect=409)
    api.allocate(consumer, {rp: {"VCPU": 1}}, generation=None, expect=409)
    # A 409 outside allocation writes is not an allocation conflict.
    api.put(f"/resource_providers/{rp}", {"name": "renamed"})
    other = api.create_provider(name="taken")
    assert api.put(f"/resource_providers/{other}", {"name": "renamed"}).status_code == 409
    after = scrape(api)

    def moved(code, reason=""):
        return value(after, "berth_allocation_conflicts_total", code=code, reason=reason) - value(
            before, "berth_allocation_conflicts_total", code=code, reason=reason
        )

    # Placement answers an over-capacity write with no code of its own; the reason tells it apart.
    assert moved("placement.undefined_code", "capacity_exceeded") == 1
    assert moved("placement.undefined_code") == 0
    assert moved("placement.concurrent_update") == 1
    assert moved("placement.duplicate_name") == 0


def test_the_cloud_figures_are_what_the_api_reports(api):
    for lease in api.get("/berth/leases").json_body["leases"]:
        api.delete(f"/berth/leases/{lease['consumer_uuid']}")
    inventories = [
        {"VCPU": {"total": 16, "allocation_ratio": 1.5}, "MEMORY_MB": {"total": 4096, "reserved": 512}},
        {"VCPU": {"total": 7, "reserved": 1, "allocation_ratio": 2.3}, "DISK_GB": 100},
        {"VCPU": {"total": 16, "allocation_ratio": 1.5}},
    ]
    providers = [api.create_provider(inventory=inventory) for inventory in inventories]
    api.allocate(new_uuid(), {providers[0]: {"VCPU": 5, "MEMORY_MB": 1024}, providers[1]: {"DISK_GB": 10}})
    api.allocate(new_uuid(), {providers[1]: {"VCPU": 12}})
    api.allocate(new_uuid(), {providers[2]: {"VCPU": 1}})
    assert api.put(f"/berth/leases/{new_uuid()}", {"expires_in": 60}).status_code == 200

    used: dict[str, int] = {}
    capacities: dict[str, int] = {}
    for rp in providers:
        for name, amount in api.get(f"/resource_providers/{rp}/usages").json_body["usages"].items():
            used[name] = used.get(name, 0) + amount
        for name, inv in api.get(f"/resource_providers/{rp}/inventories").json_body["inventories"].items():
            capacities[name] = capacities.get(name, 0) + capacity(
                inv["total"], inv["reserved"], inv["allocation_ratio"]
            )
    samples = scrape(api)
    for name in capacities:
        assert value(samples, "berth_capacity", resource_class=name) == capacities[name]
        assert value(samples, "berth_used", resource_class=name) == used[name]
        assert value(samples, "berth_free", resource_class=name) == capacities[name] - used[name]
    assert value(samples, "berth_capacity", resource_class="VCPU") == 24 + 13 + 24
    assert value(samples, "berth_providers") == len(api.get("/resource_providers").json_body["resource_providers"])
    assert value(samples, "berth_consumers") == 3
    assert value(samples, "berth_leases_outstanding") == len(api.get("/berth/leases").json_body["leases"]) == 1


def test_an_empty_cloud_has_counts_and_no_classes(api):
    samples = scrape(api)
    assert value(samples, "berth_providers") == 0
    assert not [key for key in samples if key[0] == "berth_capacity"]


def test_retries_and_pool_connections_are_reported(db):
    api = Api(PlacementApp(db))
    before = value(scrape(api), "berth_db_transaction_retries_total")
    failures = iter([True])

    def once_busy(conn):
        if next(failures, False):
            raise exc.OperationalError("BEGIN", {}, Exception("database is locked"))
        return 1

    assert db.write(once_busy) == 1
    samples = scrape(api)
    assert value(samples, "berth_db_transaction_retries_total") - before == 1
    assert ("berth_db_pool_connections_in_use", ()) in samples


# ---- who may read it ----------------------------------------------------------------------------------


def test_guarded_metrics_need_a_token_and_the_rule(db):
    api = Api(PlacementApp(db, Settings(metrics="guarded")))
    assert api.get("/metrics", token="").status_code == 401
    assert api.get("/metrics", token="alice:tenant-a").status_code == 403
    assert api.get("/metrics").status_code == 200


def test_the_rule_can_be_granted_by_a_policy_file(db, tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text('"berth:metrics": "role:monitoring"\n')
    api = Api(PlacementApp(db, Settings(policy_file=str(policy))))
    assert api.get("/metrics", token="prom:ops", headers={"X-Roles": "monitoring"}).status_code == 200
    assert api.get("/metrics", token="alice:tenant-a").status_code == 403


def test_open_metrics_need_no_token(db):
    api = Api(PlacementApp(db, Settings(metrics="open")))
    assert scrape(api, token="", version="")
    assert api.get("/resource_providers", token="").status_code == 401


def test_metrics_off_are_not_served_nor_counted(db):
    api = Api(PlacementApp(db, Settings(metrics="off")))
    assert api.get("/metrics").status_code == 404
    counted = Api(PlacementApp(db))
    key = {"route": "/traits", "method": "GET", "status": "200"}
    before = value(scrape(counted), "berth_http_requests_total", **key)
    assert api.get("/traits").status_code == 200
    assert value(scrape(counted), "berth_http_requests_total", **key) == before


def test_openmetrics_is_answered_to_who_asks_for_it(api):
    r = api.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("application/openmetrics-text")
    assert r.data.rstrip().endswith(b"# EOF")


def test_the_live_gauges_of_dead_workers_are_dropped(tmp_path):
    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)
    (tmp_path / f"gauge_livesum_{dead}.db").write_bytes(b"")
    (tmp_path / f"gauge_livesum_{os.getpid()}.db").write_bytes(b"")
    (tmp_path / f"counter_{dead}.db").write_bytes(b"")
    forget_dead_processes(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"gauge_livesum_{os.getpid()}.db", f"counter_{dead}.db"]
    )


# ---- a real server --------------------------------------------------------------------------------------

_REQUEST_LINE = re.compile(r" (\d+) INFO berth\.request: .* route=/traits method=GET status=200 ")


def _get(url):
    request = urllib.request.Request(
        url,
        headers={"X-Auth-Token": "admin", "OpenStack-API-Version": "placement latest", "Connection": "close"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read()


def test_a_live_server_sums_the_requests_of_every_worker(tmp_path):
    live = LiveServer(f"sqlite:///{tmp_path / 'live.sqlite'}", workers=2)
    try:
        sent = 0
        workers: set[str] = set()
        deadline = time.monotonic() + 60
        # Each request on a new connection, until both workers have answered some.
        while len(workers) < 2 and time.monotonic() < deadline:
            for _ in range(20):
                _get(f"{live.url}/traits")
                sent += 1
            workers = set(_REQUEST_LINE.findall(live.server.log_text()))
        assert len(workers) == 2, "one worker answered every request"
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(_get(f"{live.url}/metrics").decode())
            for s in family.samples
        }
        assert value(samples, "berth_http_requests_total", route="/traits", method="GET", status="200") == sent
        assert value(samples, "berth_providers") == 0
    finally:
        log = live.stop()
    assert "Traceback" not in log, log


def test_a_killed_servers_metrics_folder_is_removed_by_the_next_server(tmp_path):
    """A server killed with SIGKILL cannot remove its temporary metrics folder; the next one to
    start removes the folders whose lock nobody holds any more, and only those."""
    running = tmp_path / "berth-metrics-running"
    killed = tmp_path / "berth-metrics-killed"
    older = tmp_path / "berth-metrics-older"  # made before folders were locked: left alone
    for folder in (running, killed, older):
        folder.mkdir()
        (folder / "counter_1.db").write_bytes(b"")
    lock = hold(str(running))
    os.close(hold(str(killed)))  # its holder gone, as the kernel lets go of a killed process's locks
    try:
        assert remove_orphans(str(tmp_path)) == [str(killed)]
        assert not killed.exists() and running.exists() and older.exists()
    finally:
        os.close(lock)
    assert remove_orphans(str(tmp_path)) == [str(running)]
