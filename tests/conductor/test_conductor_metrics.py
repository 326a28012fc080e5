"""The conductors' ``GET /metrics``: the request metrics (``berth_http_…``) counted as the service
counts them, and the journal's operations as written by the journal itself: the reschedules counted
only where another host was tried, and the running gauge at 0 for the kinds that have none running.
Through the real WSGI application over a real journal; the Placement service is never called."""

from __future__ import annotations

import re
import uuid

import pytest
from werkzeug.test import Client

from berth.clients.placement import PlacementClient
from berth.conductor.api.app import ApiSettings, create_app
from berth.conductor.api.handlers.operations import KINDS
from berth.conductor.control.plane import ControlPlane
from berth.conductor.journal import DONE, FAILED, RUNNING, Journal

ADMIN = {"X-Auth-Token": "admin"}
# Nothing listens there: these metrics are read from the conductors' database alone.
NO_SERVICE = "http://127.0.0.1:9"


@pytest.fixture
def database(tmp_path):
    return f"sqlite:///{tmp_path / 'conductor.sqlite'}"


@pytest.fixture
def plane(database):
    made = ControlPlane(database, PlacementClient(NO_SERVICE))
    yield made
    made.close()


def samples(text: str, name: str) -> dict[str, float]:
    """The samples of metric ``name`` (the full series name), by their labels' text."""
    found = {}
    for line in text.splitlines():
        matched = re.fullmatch(rf"{re.escape(name)}(\{{[^}}]*\}})? (\S+)", line)
        if matched:
            found[matched.group(1) or ""] = float(matched.group(2))
    return found


def scrape(web: Client) -> str:
    answer = web.get("/metrics", headers=ADMIN)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return answer.get_data(as_text=True)


@pytest.mark.parametrize("mode", ["guarded", "open"])
def test_the_conductors_requests_are_counted_by_route(plane, mode):
    web = Client(create_app(plane, ApiSettings(metrics=mode)))
    labels = '{method="GET",route="/berth/openapi.json",status="200"}'
    before = samples(scrape(web), "berth_http_requests_total").get(labels, 0.0)
    assert web.get("/berth/openapi.json").status_code == 200
    text = scrape(web)
    assert samples(text, "berth_http_requests_total")[labels] == before + 1
    assert samples(text, "berth_http_request_duration_seconds_count")['{method="GET",route="/berth/openapi.json"}']
    # The scrape itself is a request of the API's own route.
    assert '{method="GET",route="/metrics",status="200"}' in samples(text, "berth_http_requests_total")


def test_with_the_metrics_off_nothing_is_served_or_counted(plane):
    counted = Client(create_app(plane, ApiSettings(metrics="open")))
    off = Client(create_app(plane, ApiSettings(metrics="off")))
    labels = '{method="GET",route="/healthz",status="200"}'
    before = samples(scrape(counted), "berth_http_requests_total").get(labels, 0.0)
    assert off.get("/healthz").status_code == 200
    assert off.get("/metrics", headers=ADMIN).status_code == 404
    assert samples(scrape(counted), "berth_http_requests_total").get(labels, 0.0) == before


def _journaled(journal: Journal, kind: str, attempts: list[dict[str, object]], state: str) -> None:
    """An operation as the conductor leaves it: started, its attempts written as its steps append
    them, then its end."""
    operation = journal.start(kind, str(uuid.uuid4()), {}, owner="conductor-1")
    for attempt in attempts:
        operation.attempts.append(attempt)
        journal.save(operation)
    operation.state = state
    journal.save(operation)


def nothing() -> dict[str, object]:
    return {"host": None, "reason": "No valid host was found. There are not enough hosts available."}


def refused(host: str) -> dict[str, object]:
    return {"host": host, "reason": "the destination refused the move: not enough room"}


def test_reschedules_count_the_hosts_after_which_another_host_was_tried(plane, database):
    journal = Journal(database)  # the journal alone, without the servers' rows beside it
    try:
        # As the tester's cloud had them: each failed "after 1 attempt(s)", no other host tried.
        _journaled(journal, "build", [nothing()], FAILED)
        _journaled(journal, "migrate", [nothing()], FAILED)
        _journaled(journal, "live_migrate", [refused("host-1")], FAILED)
        web = Client(create_app(plane))
        assert samples(scrape(web), "berth_conductor_reschedules_total") == {
            '{kind="build"}': 0.0,
            '{kind="live_migrate"}': 0.0,
            '{kind="migrate"}': 0.0,
        }
        # host-1 refused, host-2 took it: one reschedule.
        _journaled(journal, "build", [refused("host-1")], DONE)
        # host-1 refused, host-2 refused, no host left: one (after host-1).
        _journaled(journal, "migrate", [refused("host-1"), refused("host-2")], FAILED)
        # host-1 refused, the scheduler found nothing more: no host tried after it.
        _journaled(journal, "build", [refused("host-1"), nothing()], FAILED)
        # host-1 and host-2 refused, host-3 took it: two.
        _journaled(journal, "live_migrate", [refused("host-1"), refused("host-2")], DONE)
        assert samples(scrape(web), "berth_conductor_reschedules_total") == {
            '{kind="build"}': 1.0,
            '{kind="live_migrate"}': 2.0,
            '{kind="migrate"}': 1.0,
        }
        # Running, its last refusal not yet followed by anything: counted once the next host is.
        _journaled(journal, "resize", [refused("host-1")], RUNNING)
        assert samples(scrape(web), "berth_conductor_reschedules_total")['{kind="resize"}'] == 0.0
    finally:
        journal.close()


def test_the_running_gauge_is_zero_for_every_kind_with_none_running(plane, database):
    web = Client(create_app(plane))
    running = samples(scrape(web), "berth_conductor_operations_running")
    assert running == {f'{{kind="{kind}"}}': 0.0 for kind in KINDS}
    journal = Journal(database)
    try:
        _journaled(journal, "build", [], RUNNING)
        _journaled(journal, "build", [], RUNNING)
        _journaled(journal, "migrate", [], DONE)
    finally:
        journal.close()
    running = samples(scrape(web), "berth_conductor_operations_running")
    assert running['{kind="build"}'] == 2.0
    assert running['{kind="migrate"}'] == 0.0
    assert running['{kind="delete"}'] == 0.0
