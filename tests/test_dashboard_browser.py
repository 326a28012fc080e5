"""The dashboard in a real browser: headless Chromium against a real ``berth serve``.

The page must show what the API reports, follow a change made through the API at its next refresh,
and show the request and conflict figures of ``/metrics`` (or say they are unavailable); given the
conductors' URL, it shows their control plane, read across origins from a ``berth conductor``.
"""

import json
import subprocess
import sys
from pathlib import Path

import browserhelpers
import pytest
from apihelpers import new_uuid
from browserhelpers import watched_page
from livehelpers import LiveServer, free_port
from prometheus_client.parser import text_string_to_metric_families

for _helpers in ("tracker", "conductor_service"):
    sys.path.insert(0, str(Path(__file__).resolve().parent / _helpers))

from agenthelpers import Agent  # noqa: E402 - the tracker's helpers are on the path only from here
from servicehelpers import ended, ensure_flavors, wait_for  # noqa: E402 - as above

from berth.clients.conductor import ConductorClient  # noqa: E402 - after the path, as above
from berth.domain.capacity import capacity  # noqa: E402 - after the path, as above
from berth.testbed.services.conductor import ConductorProcess  # noqa: E402 - after the path, as above

pytestmark = pytest.mark.slow

# One headless Chromium for the module (berth's browser tests share how it is started).
browser = browserhelpers.browser

REFRESH_TIMEOUT_MS = 20_000


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    server = LiveServer(f"sqlite:///{tmp_path_factory.mktemp('dashboard') / 'placement.sqlite'}", workers=2)
    client = server.client()
    yield server, client
    client.close()
    server.stop()


def _provider(client, name, inventory, parent=None):
    uuid = new_uuid()
    body = {"name": name, "uuid": uuid}
    if parent:
        body["parent_provider_uuid"] = parent
    client.call("POST", "/resource_providers", body)
    client.call(
        "PUT",
        f"/resource_providers/{uuid}/inventories",
        {"resource_provider_generation": 0, "inventories": inventory},
    )
    return uuid


def _allocate(client, consumer, allocations, project="tenant-a", expect=(204,)):
    body = {
        "allocations": {rp: {"resources": resources} for rp, resources in allocations.items()},
        "project_id": project,
        "user_id": "user",
        "consumer_generation": None,
        "consumer_type": "INSTANCE",
    }
    return client.call("PUT", f"/allocations/{consumer}", body, expect=expect)


def _api_totals(client, providers):
    totals = {}
    for uuid in providers:
        inventories = client.call("GET", f"/resource_providers/{uuid}/inventories")["inventories"]
        usages = client.call("GET", f"/resource_providers/{uuid}/usages")["usages"]
        for rc, inv in inventories.items():
            entry = totals.setdefault(rc, {"capacity": 0, "used": 0})
            entry["capacity"] += capacity(inv["total"], inv["reserved"], inv["allocation_ratio"])
            entry["used"] += usages[rc]
    return totals


def _page_totals(page):
    return page.eval_on_selector_all(
        "#classes tbody tr",
        "rows => Object.fromEntries(rows.map(r => [r.dataset.class,"
        " {capacity: Number(r.dataset.capacity), used: Number(r.dataset.used)}]))",
    )


def _bars_of(page, uuid):
    return page.eval_on_selector_all(
        f'li.provider[data-uuid="{uuid}"] > .inventories .inventory',
        "cells => Object.fromEntries(cells.map(c => [c.dataset.class, Number(c.dataset.used)]))",
    )


def _refreshes(page):
    return int(page.get_attribute("body", "data-refreshes"))


def test_the_dashboard_shows_what_the_api_reports(served, browser, tmp_path):
    server, client = served
    hosts = []
    for i in range(3):
        host = _provider(
            client,
            f"compute-{i}",
            {"VCPU": {"total": 16, "reserved": 2, "allocation_ratio": 2.0}, "MEMORY_MB": {"total": 32768}},
        )
        numa = _provider(client, f"compute-{i}-numa0", {"PCPU": {"total": 8}}, parent=host)
        hosts += [host, numa]
    _allocate(client, new_uuid(), {hosts[0]: {"VCPU": 6, "MEMORY_MB": 8192}, hosts[1]: {"PCPU": 2}})
    _allocate(client, new_uuid(), {hosts[2]: {"VCPU": 3}}, project="tenant-b")

    page = browser.new_page(viewport={"width": 1280, "height": 1100})
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{server.url}/dashboard")
    # noauth2: the page opens without asking for a token.
    page.wait_for_selector("body[data-state=live]", timeout=REFRESH_TIMEOUT_MS)
    assert page.is_hidden("#auth")

    assert _page_totals(page) == _api_totals(client, hosts)
    host = hosts[0]
    usages = client.call("GET", f"/resource_providers/{host}/usages")["usages"]
    assert _bars_of(page, host) == usages
    assert page.text_content(f'li.provider[data-uuid="{host}"] .inventory[data-class="VCPU"]') == "6 / 28"
    assert page.locator(f'li.provider[data-uuid="{host}"] li.provider[data-uuid="{hosts[1]}"]').count() == 1
    assert page.text_content("#count-roots") == "3"
    # The rankings come after the totals, from their own read, and are the API's.
    page.wait_for_selector(".rankings[data-state=live]", timeout=REFRESH_TIMEOUT_MS)
    rankings = client.call("GET", "/berth/dashboard/rankings")
    for table, key in (
        ("fullest", "fullest_providers"),
        ("consumers", "biggest_consumers"),
        ("projects", "biggest_projects"),
    ):
        shown = page.eval_on_selector_all(f"#{table} tbody tr", "rows => rows.map(r => r.dataset.id)")
        assert shown == [entry["id"] for entry in rankings[key]] and shown, table
    page.screenshot(path=tmp_path / "dashboard.png", full_page=True)

    # A new allocation shows at the next refresh.
    seen = _refreshes(page)
    _allocate(client, new_uuid(), {host: {"VCPU": 4}})
    page.wait_for_function(f"Number(document.body.dataset.refreshes) > {seen}", timeout=REFRESH_TIMEOUT_MS)
    page.wait_for_function(
        f"document.querySelector('li.provider[data-uuid=\"{host}\"] .inventory[data-class=VCPU]')"
        ".dataset.used === '10'",
        timeout=REFRESH_TIMEOUT_MS,
    )
    assert _page_totals(page) == _api_totals(client, hosts)

    # Searching pages through the trees on the server: one tree, found by its child's name.
    page.fill("#search", "compute-2-numa")
    page.wait_for_function("document.querySelectorAll('#provider-list > li').length === 1", timeout=REFRESH_TIMEOUT_MS)
    assert page.get_attribute("#provider-list > li", "data-uuid") == hosts[4]

    # An allocation beyond capacity is a conflict, which the activity panel counts from /metrics.
    _allocate(client, new_uuid(), {hosts[2]: {"VCPU": 1000}}, expect=(409,))
    metrics_status = client.request("GET", "/metrics").status_code
    if metrics_status == 200:
        page.wait_for_function(
            "document.querySelector('#metrics').dataset.state === 'live' && "
            "document.querySelector('[data-metric=conflicts] .value').textContent !== '0.00'",
            timeout=REFRESH_TIMEOUT_MS,
        )
        assert float(page.text_content("[data-metric=request-rate] .value")) > 0
    else:
        page.wait_for_selector("#metrics[data-state=unavailable]", timeout=REFRESH_TIMEOUT_MS)
        assert "metrics unavailable" in page.text_content("#metrics")
    page.screenshot(path=tmp_path / "dashboard-live.png", full_page=True)
    assert errors == []


def test_the_quotas_panel_shows_each_limit_against_its_usage(served, browser):
    server, client = served
    host = _provider(client, "quota-host", {"VCPU": {"total": 64}, "MEMORY_MB": {"total": 65536}})
    _allocate(client, new_uuid(), {host: {"VCPU": 6, "MEMORY_MB": 2048}}, project="tenant-q")
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{server.url}/dashboard")
    page.wait_for_selector("#quotas[data-state=live]", timeout=REFRESH_TIMEOUT_MS)
    assert page.is_visible("#quotas-none")
    client.call("PUT", "/berth/quotas/tenant-q", {"limits": {"VCPU": 8, "consumers": 4}})
    page.wait_for_selector('#quota-limits tr[data-project="tenant-q"]', timeout=REFRESH_TIMEOUT_MS)
    shown = page.eval_on_selector_all(
        '#quota-limits tr[data-project="tenant-q"]',
        "rows => rows.map(r => [r.dataset.resource, Number(r.dataset.used), Number(r.dataset.limit)])",
    )
    assert shown == [["VCPU", 6, 8], ["consumers", 1, 4]]
    assert page.text_content('#quota-limits tr[data-resource="VCPU"] td.num') == "6 / 8"
    assert page.is_hidden("#quotas-none")
    client.call("DELETE", "/berth/quotas/tenant-q", expect=(204,))
    assert errors == []


def test_a_refused_caller_sees_nothing(served, browser):
    server, _ = served
    page = browser.new_page()
    # A plain user's token under noauth2: the policy refuses it the figures.
    page.add_init_script("sessionStorage.setItem('berth.dashboard.token', 'alice:tenant-a')")
    page.goto(f"{server.url}/dashboard")
    page.wait_for_selector("body[data-state=refused]", timeout=REFRESH_TIMEOUT_MS)
    assert page.is_hidden("#content")
    assert page.locator("#provider-list > li").count() == 0


def test_the_timing_script_times_the_first_paint_and_the_rankings(tmp_path):
    # In a process of its own: Playwright's sync API cannot start a second time in a process whose
    # module fixture already runs a browser.
    code = (
        "import json, sys\n"
        "from berth.testbed import dashboard_timing as timing\n"
        "args = timing.parse(sys.argv[2:])\n"
        "print(json.dumps(timing.measure(args, sys.argv[1] + '/placement.sqlite', sys.argv[1])))\n"
    )
    options = ["--hosts", "6", "--consumers-per-host", "2", "--runs", "1", "--workers", "2"]
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path), *options], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    for phase in ("cold", "warm"):
        [(painted, wall, ranked)] = figures[phase]
        # The numbers are painted after the navigation started and before the wait around it ended.
        assert 0 < painted <= wall + 50 and ranked > 0, phase
    assert all(ms is not None and ms > 0 for ms in figures["endpoints"].values())


@pytest.fixture(scope="module")
def hot_cloud(tmp_path_factory):
    """45 hosts (three pages of trees): a GPU child on every fifth, full; one host whose CPUs are full;
    one shrunk to half what it had given; twelve consumers alike in one project. Its own server, as
    the last test stops it to see the page go stale."""
    server = LiveServer(f"sqlite:///{tmp_path_factory.mktemp('hot') / 'placement.sqlite'}", workers=2)
    client = server.client()
    host_inventory = {"VCPU": {"total": 16}, "MEMORY_MB": {"total": 65536}}
    hosts = {}
    for i in range(45):
        name = f"node-{i:02d}"
        host = _provider(client, name, host_inventory)
        hosts[name] = host
        if i % 5 == 0:
            gpu = _provider(client, f"{name}-gpu0", {"VGPU": {"total": 2}}, parent=host)
            _allocate(client, new_uuid(), {gpu: {"VGPU": 2}, host: {"VCPU": 2, "MEMORY_MB": 4096}})
    _allocate(client, new_uuid(), {hosts["node-07"]: {"VCPU": 16, "MEMORY_MB": 40960}})
    _allocate(client, new_uuid(), {hosts["node-21"]: {"VCPU": 8}})
    client.call(
        "PUT",
        f"/resource_providers/{hosts['node-21']}/inventories",
        {"resource_provider_generation": 2, "inventories": {"VCPU": {"total": 4}, "MEMORY_MB": {"total": 65536}}},
    )
    for i in range(12):
        _allocate(client, new_uuid(), {hosts[f"node-{30 + i}"]: {"VCPU": 1, "MEMORY_MB": 2048}})
    yield server, client, hosts
    client.close()
    server.stop()


def _open(browser, server, width, height=1000):
    """A page of the dashboard at ``width`` px, live and with its rankings; with the answers it got
    that refused it (401, 403) and its script errors."""
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.refused = []
    page.errors = []
    page.on("response", lambda r: page.refused.append(r.url) if r.status in (401, 403) else None)
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.goto(f"{server.url}/dashboard")
    page.wait_for_selector("body[data-state=live]", timeout=REFRESH_TIMEOUT_MS)
    page.wait_for_selector(".rankings[data-state=live]", timeout=REFRESH_TIMEOUT_MS)
    return page


def _no_overflow(page):
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_every_figure_and_the_hot_hosts_first_at_1440_px(hot_cloud, browser, tmp_path):
    server, client, hosts = hot_cloud
    page = _open(browser, server, 1440)
    assert _page_totals(page) == _api_totals(client, hosts.values()) | {"VGPU": {"capacity": 18, "used": 18}}
    assert page.text_content("#count-roots") == "45"
    assert page.text_content("#count-over") == "1 provider over capacity"
    # Hot hosts first, one row each: over capacity, then the host whose CPUs are full, then the hosts
    # whose GPU child is full, that child named within its host.
    fullest = page.eval_on_selector_all(
        "#fullest tbody tr", "rows => rows.map(r => [r.cells[0].textContent, r.dataset.level])"
    )
    assert fullest[0] == ["node-21", "over"] and fullest[1] == ["node-07", "full"]
    assert fullest[2] == ["node-30› node-30-gpu0", "full"]
    assert len({name for name, _ in fullest}) == len(fullest) == 10
    # Over capacity is drawn apart from full.
    over_bar = page.eval_on_selector(
        "#fullest tbody tr:first-child .bar > span", "s => getComputedStyle(s).backgroundImage"
    )
    full_bar = page.eval_on_selector(
        "#fullest tbody tr:nth-child(2) .bar > span", "s => getComputedStyle(s).backgroundImage"
    )
    assert over_bar != full_bar and "gradient" in over_bar
    assert page.text_content("#fullest tbody tr:first-child .bar em") == "200% over"
    # Consumers alike are one row with their count.
    grouped = page.eval_on_selector_all("#consumers tbody tr", "rows => rows.map(r => Number(r.dataset.consumers))")
    assert 12 in grouped and len(grouped) < 10
    assert _no_overflow(page)
    page.screenshot(path=tmp_path / "dashboard-1440.png", full_page=True)
    assert page.errors == []


def test_the_trees_fullest_first_and_over_capacity_only(hot_cloud, browser):
    server, _, hosts = hot_cloud
    page = _open(browser, server, 1440)
    page.select_option("#sort", "usage")
    page.wait_for_function(
        f"document.querySelector('#provider-list > li').dataset.uuid === '{hosts['node-21']}'",
        timeout=REFRESH_TIMEOUT_MS,
    )
    order = page.eval_on_selector_all("#provider-list > li", "items => items.map(i => i.dataset.name)")
    assert order[:3] == ["node-21", "node-07", "node-30"]
    page.select_option("#above", "100")
    page.wait_for_function("document.querySelectorAll('#provider-list > li').length === 1", timeout=REFRESH_TIMEOUT_MS)
    assert page.get_attribute("#provider-list > li", "data-uuid") == hosts["node-21"]
    assert "over" in page.get_attribute("#provider-list > li .bar", "class")
    assert page.errors == []


def test_4xx_answers_and_conflicts_by_their_reason(hot_cloud, browser, tmp_path):
    server, client, hosts = hot_cloud
    if client.request("GET", "/metrics").status_code != 200:
        pytest.skip("/metrics is not served")
    page = _open(browser, server, 1440)
    # Two samples of /metrics around a 404 and a write beyond capacity.
    page.wait_for_selector("#metrics[data-state=live]", timeout=REFRESH_TIMEOUT_MS)
    client.request("GET", f"/resource_providers/{new_uuid()}")
    _allocate(client, new_uuid(), {hosts["node-01"]: {"VCPU": 1000}}, expect=(409,))
    # A conflict with a code of its own (a consumer written again as if new): named by its code as
    # the API answers it, underscores and all, where a reason reads as words.
    consumer = new_uuid()
    _allocate(client, consumer, {hosts["node-01"]: {"VCPU": 1}})
    _allocate(client, consumer, {hosts["node-01"]: {"VCPU": 1}}, expect=(409,))
    page.wait_for_function(
        "document.querySelector('[data-metric=client-errors] .value')?.textContent !== '0' &&"
        " document.querySelector('[data-metric=conflicts]')?.textContent.includes('capacity exceeded') &&"
        " document.querySelector('[data-metric=conflicts]')?.textContent.includes('placement.concurrent_update')",
        timeout=REFRESH_TIMEOUT_MS,
    )
    assert "undefined" not in page.text_content("[data-metric=conflicts]")
    assert "404" in page.text_content("[data-metric=client-errors]")
    page.screenshot(path=tmp_path / "dashboard-activity.png", full_page=True)


def test_a_phone_sees_the_whole_page_and_reaches_next(hot_cloud, browser, tmp_path):
    server, _, _ = hot_cloud
    page = _open(browser, server, 390, 844)
    assert _no_overflow(page), page.evaluate("document.documentElement.scrollWidth")
    box = page.locator("#next").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390
    page.click("#next")
    page.wait_for_function(
        "document.querySelector('#page-info').textContent.startsWith('page 2 of 3')", timeout=REFRESH_TIMEOUT_MS
    )
    assert _no_overflow(page)
    page.screenshot(path=tmp_path / "dashboard-390.png", full_page=True)
    assert page.errors == []


def _refused_unrouted(client):
    """The 401 and 403 answers the service counted on paths no route serves (``/favicon.ico``);
    the browser's own requests, such as the favicon's, are not reported to the page's listeners."""
    samples = text_string_to_metric_families(client.request("GET", "/metrics").text)
    return sum(
        sample.value
        for family in samples
        for sample in family.samples
        if sample.name == "berth_http_requests_total"
        and sample.labels["route"] == "unmatched"
        and sample.labels["status"] in ("401", "403")
    )


def test_no_request_of_the_page_is_refused(hot_cloud, browser):
    server, client, _ = hot_cloud
    if client.request("GET", "/metrics").status_code != 200:
        pytest.skip("/metrics is not served")
    before = _refused_unrouted(client)
    page = _open(browser, server, 1440)
    # A second refresh: the browser asked for its icon long before.
    page.wait_for_function("Number(document.body.dataset.refreshes) >= 2", timeout=REFRESH_TIMEOUT_MS)
    assert page.refused == []
    # The favicon is the page's own asset, which needs no token.
    assert _refused_unrouted(client) == before


def test_the_figures_go_grey_with_their_time_when_the_service_goes(hot_cloud, browser, tmp_path):
    # Last of the module: it stops the server.
    server, _, _ = hot_cloud
    page = _open(browser, server, 1440)
    server.server.stop(grace=5.0)
    page.wait_for_selector("body[data-stale=true]", timeout=REFRESH_TIMEOUT_MS)
    assert "figures as of" in page.text_content("#status")
    assert float(page.eval_on_selector("main", "m => getComputedStyle(m).opacity")) < 1
    assert page.text_content("#count-roots") == "45"
    page.screenshot(path=tmp_path / "dashboard-stale.png", full_page=True)


def test_the_control_plane_is_hidden_without_conductors(served, browser):
    server, client = served
    assert client.call("GET", "/dashboard/config.json")["conductor_url"] is None
    page = browser.new_page()
    page.goto(f"{server.url}/dashboard")
    page.wait_for_selector("body[data-state=live]", timeout=REFRESH_TIMEOUT_MS)
    assert page.is_hidden("#control")


# Heartbeats in seconds, short so that a stopped agent's host is down within seconds.
FAST = ["--heartbeat-interval", "0.5", "--dead-after", "3", "--host-down-after", "3"]
AGENT_TOPOLOGY = {"cells": [{"cpus": 4, "memory_mb": 8192}], "disk_gb": 100}
# More memory than either host has: its build finds no host and fails.
HUGE = {"name": "huge", "vcpus": 1, "ram": 1024 * 1024, "disk": 1}


@pytest.fixture(scope="module")
def control_cloud(tmp_path_factory):
    """A ``berth serve`` whose dashboard reads a ``berth conductor`` that allows its origin (the port
    of the conductors chosen first, as each names the other), two agents registered with it, one
    server built on the host of one, a build that failed, and that host then down (its agent stopped)."""
    conductor_port = free_port()
    server = LiveServer(
        f"sqlite:///{tmp_path_factory.mktemp('control') / 'placement.sqlite'}",
        workers=2,
        extra=["--dashboard-conductor", f"http://127.0.0.1:{conductor_port}"],
    )
    folder = tmp_path_factory.mktemp("conductor")
    conductor = ConductorProcess(
        server.url,
        f"sqlite:///{folder / 'conductor.sqlite'}",
        str(folder),
        extra=[*FAST, "--cors-allowed-origin", server.url],
    ).start(port=conductor_port)
    agents = {
        name: Agent(
            server.url,
            tmp_path_factory.mktemp(name),
            name,
            topology=AGENT_TOPOLOGY,
            extra=["--conductor", conductor.url, "--zone", zone, "--heartbeat-interval", "0.5"],
        )
        for name, zone in {"alpha": "zone-a", "beta": "zone-b"}.items()
    }
    client = ConductorClient(conductor.url, "admin")
    try:
        wait_for(lambda: len(client.get("/hosts")["hosts"]) == 2, what="both hosts registered")
        ensure_flavors(client)
        client.request("POST", "/flavors", {"flavor": HUGE})
        made = client.request("POST", "/servers", {"server": {"name": "vm", "flavorRef": "small"}})["server"]
        assert ended(client, made["operation_id"])["state"] == "done"
        failing = client.request("POST", "/servers", {"server": {"name": "too-big", "flavorRef": "huge"}})["server"]
        failed = ended(client, failing["operation_id"])
        assert failed["state"] in ("failed", "rolled_back"), failed
        host = client.get(f"/servers/{made['id']}")["server"]["OS-EXT-SRV-ATTR:host"]
        agents[host].stop()
        wait_for(lambda: client.get(f"/hosts/{host}")["host"]["state"] == "down", what=f"{host} down")
        yield server, client, {"down": host, "failed": failed, "conductor": conductor}
    finally:
        for agent in agents.values():
            agent.stop()
        conductor.stop()
        server.stop()


def _host_rows(page):
    return page.eval_on_selector_all(
        "#control-hosts tbody tr",
        "rows => rows.map(r => ({name: r.dataset.host, state: r.dataset.state, servers: Number(r.dataset.servers),"
        " down: r.classList.contains('host-down')}))",
    )


def _open_control(browser, server, width, height=1000):
    page = watched_page(browser, width, height)
    page.goto(f"{server.url}/dashboard")
    page.wait_for_selector("#control[data-state=live]", timeout=REFRESH_TIMEOUT_MS)
    return page


def test_the_control_plane_shows_hosts_up_and_down_servers_per_host_and_failures(control_cloud, browser, tmp_path):
    server, client, made = control_cloud
    page = _open_control(browser, server, 1280)
    assert page.is_visible("#control")
    api_hosts = client.get("/hosts")["hosts"]
    rows = _host_rows(page)
    # Every host, with its state and the servers on it as the API counts them; the down one first, marked.
    assert sorted((r["name"], r["state"], r["servers"]) for r in rows) == sorted(
        (h["name"], h["state"], h["servers"]) for h in api_hosts
    )
    assert rows[0] == {"name": made["down"], "state": "down", "servers": 1, "down": True}
    assert [r for r in rows[1:] if r["down"] or r["state"] != "up"] == []
    assert page.text_content("#control-hosts-down") == "1 down"
    assert "alarm" in page.get_attribute("#control-hosts-down", "class")
    down_badge = page.eval_on_selector(
        "#control-hosts tr.host-down .badge.down", "b => getComputedStyle(b).backgroundColor"
    )
    up_badge = page.eval_on_selector("#control-hosts .badge.up", "b => getComputedStyle(b).backgroundColor")
    assert down_badge != up_badge
    # The failed build, with its error.
    failed = made["failed"]
    row = page.locator(f'#control-failures tbody tr[data-id="{failed["id"]}"]')
    assert row.count() == 1
    assert row.locator("td.error").text_content() == failed["error"]
    assert row.locator("td").first.text_content().startswith("build")
    assert "2 servers" in page.text_content("#control-counts")
    page.screenshot(path=tmp_path / "dashboard-control.png", full_page=True)
    assert page.errors == []


def test_the_control_plane_fits_a_phone(control_cloud, browser, tmp_path):
    server, _, made = control_cloud
    page = _open_control(browser, server, 390, 844)
    assert page.get_attribute("#control-hosts tbody tr:first-child", "data-host") == made["down"]
    assert _no_overflow(page), page.evaluate("document.documentElement.scrollWidth")
    page.screenshot(path=tmp_path / "dashboard-control-390.png", full_page=True)
    assert page.errors == []


def test_conductors_gone_leave_the_service_figures_and_say_so(control_cloud, browser):
    # Last of the module: it stops the conductors.
    server, _, made = control_cloud
    page = _open_control(browser, server, 1280)
    made["conductor"].stop()
    page.wait_for_selector("#control[data-state=error]", timeout=REFRESH_TIMEOUT_MS)
    assert page.text_content("#control-counts").startswith("conductors unavailable")
    assert page.get_attribute("body", "data-state") == "live"
    assert page.get_attribute("body", "data-stale") == "false"
    # What was read stays, dimmed.
    assert page.locator("#control-hosts tbody tr").count() == 2
