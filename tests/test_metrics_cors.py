"""The request metrics behind the CORS middleware: a browser's preflight (``OPTIONS``, no token),
which the middleware answers 200 whatever the application said, is counted as the 200 it got, not
as the 401 the application gave before the middleware replaced it (the service's dashboard sends one
to the conductors at each poll)."""

from apihelpers import Api
from prometheus_client.parser import text_string_to_metric_families

from berth.api.app import Settings
from berth.api.wsgi import create_app

ORIGIN = "https://dash.example"


def _requests(api, route, method):
    """``berth_http_requests_total`` of ``route`` and ``method``, by status."""
    text = api.get("/metrics").get_data(as_text=True)
    return {
        sample.labels["status"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "berth_http_requests_total"
        and sample.labels["route"] == route
        and sample.labels["method"] == method
    }


def _preflight(api):
    return api.request(
        "OPTIONS",
        "/resource_providers",
        token="",
        version="",
        headers={
            "Origin": ORIGIN,
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "X-Auth-Token",
        },
    )


def test_a_preflight_is_counted_as_the_200_the_browser_got(session_db):
    app = create_app(
        session_db.engine.url.render_as_string(hide_password=False), Settings(cors_allowed_origins=(ORIGIN,))
    )
    api = Api(app)
    before = _requests(api, "/resource_providers", "OPTIONS")
    for _ in range(3):
        answer = _preflight(api)
        assert answer.status_code == 200
        assert answer.headers["Access-Control-Allow-Origin"] == ORIGIN
    after = _requests(api, "/resource_providers", "OPTIONS")
    assert after.get("200", 0) - before.get("200", 0) == 3
    assert after.get("401", 0) == before.get("401", 0)


def test_without_cors_an_options_is_counted_as_answered(session_db):
    api = Api(create_app(session_db.engine.url.render_as_string(hide_password=False), Settings()))
    before = _requests(api, "/resource_providers", "OPTIONS")
    answer = _preflight(api)
    assert answer.status_code == 401
    after = _requests(api, "/resource_providers", "OPTIONS")
    assert after.get("401", 0) - before.get("401", 0) == 1
