"""What an operator watches on the dashboard, in a real browser (Debian's Chromium through
Playwright) against a real ``berth serve`` and ``berth conductor``: the request figures are the API
clients' alone, and names as long as the APIs take them neither widen the page nor push a host's
state out of sight."""

import browserhelpers
import pytest
from apihelpers import new_uuid
from browserhelpers import watched_page
from livehelpers import LiveServer, free_port

from berth.clients.conductor import ConductorClient
from berth.testbed.services.conductor import ConductorProcess

pytestmark = pytest.mark.slow

# One headless Chromium for the module (berth's browser tests share how it is started).
browser = browserhelpers.browser

REFRESH_TIMEOUT_MS = 30_000
# As long as each API takes them, and without a space to break at.
LONG_HOST = "rack-17-" + "c" * 247
LONG_PROVIDER = "p" * 200


def _open(browser, url, width, height=1000):
    page = watched_page(browser, width, height)
    page.goto(f"{url}/dashboard")
    page.wait_for_selector("body[data-state=live]", timeout=REFRESH_TIMEOUT_MS)
    return page


def test_a_service_nobody_calls_shows_no_request(browser, tmp_path):
    # Nothing but the dashboard asks this service anything: the page's own polls (the quotas
    # panel's among them) are not the API's clients' requests.
    server = LiveServer(f"sqlite:///{tmp_path / 'placement.sqlite'}", workers=1)
    try:
        page = _open(browser, server.url, 1280)
        assert page.is_visible("#quotas")
        # Three polls after the first sample: the quotas were read at least twice between them.
        page.wait_for_function(
            "Number(document.body.dataset.refreshes) >= 4 &&"
            " document.querySelector('#metrics').dataset.state === 'live'",
            timeout=4 * REFRESH_TIMEOUT_MS,
        )
        page.wait_for_function(
            "document.querySelector('#metrics .note')?.textContent.match(/last (\\d+) s/)?.[1] >= 10",
            timeout=REFRESH_TIMEOUT_MS,
        )
        assert page.text_content("[data-metric=requests] .value") == "0"
        assert page.text_content("[data-metric=request-rate] .value") == "0.00"
        assert page.text_content("[data-metric=latency-mean] .value") == "–"
        assert page.errors == []
    finally:
        server.stop()


@pytest.fixture(scope="module")
def long_names(tmp_path_factory):
    """A service whose dashboard reads a conductor (which allows its origin) with 30 hosts, one of
    them named with 255 characters, and a provider of 200 characters, fullest of the cloud."""
    conductor_port = free_port()
    server = LiveServer(
        f"sqlite:///{tmp_path_factory.mktemp('long') / 'placement.sqlite'}",
        workers=1,
        extra=["--dashboard-conductor", f"http://127.0.0.1:{conductor_port}"],
    )
    folder = tmp_path_factory.mktemp("conductor")
    conductor = ConductorProcess(
        server.url, f"sqlite:///{folder / 'conductor.sqlite'}", str(folder), extra=["--cors-allowed-origin", server.url]
    ).start(port=conductor_port)
    client = server.client()
    try:
        names = [f"compute-{i:02d}" for i in range(29)] + [LONG_HOST]
        hosts = [{"name": name, "url": f"http://127.0.0.1:9/{i}", "zone": "z" * 60} for i, name in enumerate(names)]
        ConductorClient(conductor.url, "admin").request("PUT", "/hosts", {"hosts": hosts})
        uuid = new_uuid()
        client.call("POST", "/resource_providers", {"name": LONG_PROVIDER, "uuid": uuid})
        client.call(
            "PUT",
            f"/resource_providers/{uuid}/inventories",
            {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}},
        )
        body = {
            "allocations": {uuid: {"resources": {"VCPU": 6}}},
            "project_id": "q" * 255,
            "user_id": "user",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        }
        client.call("PUT", f"/allocations/{new_uuid()}", body, expect=(204,))
        yield server
    finally:
        client.close()
        conductor.stop()
        server.stop()


@pytest.mark.parametrize("width", [1280, 390])
def test_long_names_neither_widen_the_page_nor_hide_a_host_state(long_names, browser, width, tmp_path):
    page = _open(browser, long_names.url, width)
    page.wait_for_selector("#control[data-state=live]", timeout=REFRESH_TIMEOUT_MS)
    page.wait_for_selector(".rankings[data-state=live]", timeout=REFRESH_TIMEOUT_MS)
    page.wait_for_selector(f'#control-hosts tr[data-host="{LONG_HOST}"]', timeout=REFRESH_TIMEOUT_MS)
    assert page.text_content(f'li.provider[data-name="{LONG_PROVIDER}"] .provider-head strong') == LONG_PROVIDER
    assert page.text_content("#fullest tbody tr:first-child td:first-child") == LONG_PROVIDER
    page.screenshot(path=tmp_path / f"long-names-{width}.png", full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), page.evaluate(
        "document.documentElement.scrollWidth"
    )
    if width >= 1280:
        # Every host's state badge and server count is within its card's view, not scrolled out of it.
        hidden = page.eval_on_selector_all(
            "#control-hosts tbody tr",
            """rows => rows.filter(row => {
                 const card = row.closest('.control-part').getBoundingClientRect();
                 const right = row.querySelector('td.servers').getBoundingClientRect().right;
                 return right > card.right + 1;
               }).map(row => row.dataset.host)""",
        )
        assert hidden == []
    assert page.errors == []
