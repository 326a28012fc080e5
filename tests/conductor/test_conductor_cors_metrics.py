"""The conductors' request metrics count the service dashboard's CORS preflights (``OPTIONS`` of
``/berth/dashboard/control``, one a poll) as the 200 the middleware answers, not as the 401 the
API gave a request without a token before the middleware replaced it."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families
from test_conductor_dashboard import ADMIN, DASHBOARD, _preflight, hold, plane  # noqa: F401 - fixtures
from werkzeug.test import Client

from berth.conductor.api.app import ApiSettings, create_app

ROUTE = "/berth/dashboard/control"


def _preflights(web):
    text = web.get("/metrics", headers=ADMIN).get_data(as_text=True)
    return {
        sample.labels["status"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "berth_http_requests_total"
        and sample.labels["route"] == ROUTE
        and sample.labels["method"] == "OPTIONS"
    }


def test_the_dashboards_preflights_are_counted_as_answered(plane):  # noqa: F811 - the fixture imported
    web = Client(create_app(plane, ApiSettings(cors_allowed_origins=(DASHBOARD,))))
    before = _preflights(web)
    for _ in range(2):
        assert _preflight(web, DASHBOARD).status_code == 200
    after = _preflights(web)
    assert after.get("200", 0) - before.get("200", 0) == 2
    assert after.get("401", 0) == before.get("401", 0)
