"""The dashboard in a real browser: headless Chromium against a real ``berth serve``.

The page must show what the API reports, follow a change made through the API at its next refresh,
and show the request and conflict figures of ``/metrics`` (or say they are unavailable).
"""

import json
import os
import subprocess
import sys

import pytest
from apihelpers import new_uuid
from livehelpers import LiveServer

from berth.domain.capacity import capacity

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is missing (scripts/test installs Debian's chromium)", allow_module_level=True)

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright comes with the test extra")

REFRESH_TIMEOUT_MS = 20_000


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    server = LiveServer(f"sqlite:///{tmp_path_factory.mktemp('dashboard') / 'placement.sqlite'}", workers=2)
    client = server.client()
    yield server, client
    client.close()
    server.stop()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


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
