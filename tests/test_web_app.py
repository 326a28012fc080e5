"""JsonApp, the JSON API without microversions that services beside the Placement API are built from,
called through WSGI with a small table of routes: the order of its checks, its error bodies and codes,
and what it records of each request."""

from __future__ import annotations

import logging

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families
from werkzeug.test import Client

from berth.domain.errors import BerthError, Conflict
from berth.web.access.auth import noauth_caller
from berth.web.access.policy import PolicyEnforcer, RuleDefinition
from berth.web.app import JsonApp, WebCall, WebRoute
from berth.web.request_checks import MAX_BODY_BYTES
from berth.web.responses import Reply, json_reply

ADMIN = {"X-Auth-Token": "admin"}
USER = {"X-Auth-Token": "alice:garden"}
READER = {"X-Auth-Token": "bob:garden", "X-Roles": "reader"}
RULES = [
    RuleDefinition("test:things:show", "role:reader or role:admin", method="GET", path="/things/{name}"),
    RuleDefinition("test:things:update", "role:admin", method="PUT", path="/things/{name}"),
    RuleDefinition("test:metrics", "role:admin", method="GET", path="/metrics"),
]


def show(call: WebCall, name: str) -> Reply:
    assert call.caller is not None
    return json_reply({"name": name, "user": call.caller.user_id, "shelf": call.context["shelf"]})


def update(call: WebCall, name: str) -> Reply:
    return json_reply({"name": name, **call.json_body()}, headers={"x-thing": name})


def public(call: WebCall) -> Reply:
    return json_reply({"caller": call.caller})


def claim(call: WebCall) -> Reply:
    if call.json_body().get("taken"):
        raise Conflict("Someone holds it already.", code="berth.test.taken")
    raise BerthError("Nothing to claim.")


def fail(call: WebCall) -> Reply:
    raise RuntimeError("a bug")


def check_inside(call: WebCall) -> Reply:
    call.authorize("test:things:update")
    return json_reply({})


ROUTES = {
    "/things/<name>": {"GET": WebRoute(show, "test:things:show"), "PUT": WebRoute(update, "test:things:update")},
    "/public": {"GET": WebRoute(public, None)},
    "/claims": {"POST": WebRoute(claim, None)},
    "/fail": {"GET": WebRoute(fail, None)},
    "/inside": {"GET": WebRoute(check_inside, None)},
}


def make_app(metrics: str = "off") -> JsonApp:
    return JsonApp(
        ROUTES,
        authenticate=noauth_caller,
        policy=PolicyEnforcer(RULES),
        public_paths={"/public"},
        metrics=metrics,
        metrics_policy="test:metrics",
        service="shelves",
        context={"shelf": "top"},
    )


@pytest.fixture(scope="module")
def client() -> Client:
    return Client(make_app())


def error_of(response, status: int, code: str = "berth.undefined_code") -> dict:
    """The response's one error, checked for the fields every error body has."""
    assert response.status_code == status, response.data
    assert response.headers["Content-Type"] == "application/json"
    (error,) = orjson.loads(response.data)["errors"]
    assert error["status"] == status and error["code"] == code and error["title"]
    assert error["request_id"] == response.headers["x-openstack-request-id"]
    return error


def test_the_happy_path_answers_json_with_a_request_id(client):
    r = client.get("/things/lamp", headers=READER)
    assert r.status_code == 200 and r.headers["Content-Type"] == "application/json"
    assert orjson.loads(r.data) == {"name": "lamp", "user": "bob", "shelf": "top"}
    request_id = r.headers["x-openstack-request-id"]
    assert request_id.startswith("req-") and len(request_id) == len("req-") + 36
    assert client.get("/things/lamp", headers=READER).headers["x-openstack-request-id"] != request_id


def test_a_handler_reads_a_json_object_body(client):
    r = client.put("/things/lamp", headers=ADMIN, json={"colour": "green"})
    assert r.status_code == 200 and r.headers["x-thing"] == "lamp"
    assert orjson.loads(r.data) == {"name": "lamp", "colour": "green"}


def test_a_request_without_a_token_is_refused(client):
    error = error_of(client.get("/things/lamp"), 401)
    assert "requires authentication" in error["detail"]


def test_a_public_path_needs_no_token(client):
    r = client.get("/public")
    assert r.status_code == 200 and orjson.loads(r.data) == {"caller": None}


def test_an_unknown_path_is_404_and_a_method_it_does_not_serve_405(client):
    error_of(client.get("/nothing/here", headers=ADMIN), 404)
    r = client.delete("/things/lamp", headers=ADMIN)
    error_of(r, 405)
    assert r.headers["Allow"] == "GET, PUT"


def test_a_route_rule_refuses_a_caller_its_role_does_not_grant(client):
    error = error_of(client.put("/things/lamp", headers=READER, json={}), 403)
    assert "test:things:update" in error["detail"]
    error_of(client.get("/things/lamp", headers=USER), 403)


def test_a_handler_may_check_a_rule_itself(client):
    error_of(client.get("/inside", headers=USER), 403)
    assert client.get("/inside", headers=ADMIN).status_code == 200


def test_a_system_scoped_token_is_refused_whatever_its_roles(client):
    error_of(client.get("/things/lamp", headers={**ADMIN, "OpenStack-System-Scope": "all"}), 403)


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (b'{"colour": ', "Malformed JSON"),
        (b"[1, 2]", "must be a JSON object, not an array"),
        (b'"green"', "must be a JSON object, not a string"),
    ],
)
def test_a_body_that_is_no_json_object_is_400(client, body, detail):
    r = client.put("/things/lamp", headers={**ADMIN, "Content-Type": "application/json"}, data=body)
    assert detail in error_of(r, 400)["detail"]


def test_nul_characters_are_refused_before_routing(client):
    assert "NUL characters" in error_of(client.get("/things/la%00mp", headers=ADMIN), 400)["detail"]
    assert "NUL characters" in error_of(client.get("/nowhere?q=%00", headers=ADMIN), 400)["detail"]


def test_a_body_needs_a_content_type(client):
    r = client.put("/things/lamp", headers=ADMIN, data=b"{}", content_type="")
    assert "content-type header required" in error_of(r, 400)["detail"]


def test_a_body_over_the_limit_is_413_before_routing(client):
    big = b"[" + b"0," * (MAX_BODY_BYTES // 2) + b"0]"
    r = client.put("/nowhere", headers={**ADMIN, "Content-Type": "application/json"}, data=big)
    error_of(r, 413)


def test_a_handlers_error_answers_with_its_status_and_code(client):
    error = error_of(client.post("/claims", headers=ADMIN, json={"taken": True}), 409, "berth.test.taken")
    assert "Someone holds it already." in error["detail"]
    # An error with no code of its own gets Berth's undefined code, never Placement's.
    assert "Nothing to claim." in error_of(client.post("/claims", headers=ADMIN, json={}), 400)["detail"]


def test_an_unexpected_exception_is_a_logged_500(client, caplog):
    with caplog.at_level(logging.ERROR, logger="berth.web.app"):
        r = client.get("/fail", headers=ADMIN)
    error = error_of(r, 500)
    assert "a bug" not in error["detail"]
    (record,) = [rec for rec in caplog.records if rec.name == "berth.web.app"]
    assert "GET /fail" in record.getMessage() and record.exc_info is not None


def test_each_request_is_logged_with_its_service_route_and_code(client, caplog):
    with caplog.at_level(logging.INFO, logger="berth.request"):
        client.get("/things/lamp", headers=READER)
        client.post("/claims", headers=ADMIN, json={"taken": True})
        client.get("/no/such/path", headers=ADMIN)
    lines = [record.request for record in caplog.records if record.name == "berth.request"]
    assert [(line.service, line.route, line.status, line.error_code) for line in lines] == [
        ("shelves", "/things/{name}", 200, None),
        ("shelves", "/claims", 409, "berth.test.taken"),
        ("shelves", "unmatched", 404, "berth.undefined_code"),
    ]
    assert lines[0].project == "garden" and str(lines[0]).startswith("service=shelves request_id=req-")


def test_open_metrics_count_requests_by_route_template():
    client = Client(make_app(metrics="open"))

    def served() -> float:
        text = client.get("/metrics").data.decode()
        return sum(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == "berth_http_requests_total"
            and sample.labels == {"route": "/things/{name}", "method": "GET", "status": "200"}
        )

    before = served()
    for _ in range(3):
        client.get("/things/lamp", headers=READER)
    assert served() - before == 3


def test_guarded_metrics_need_a_caller_the_metrics_rule_grants():
    client = Client(make_app(metrics="guarded"))
    error_of(client.get("/metrics"), 401)
    error_of(client.get("/metrics", headers=READER), 403)
    r = client.get("/metrics", headers=ADMIN)
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/plain")


def test_without_metrics_there_is_no_metrics_route():
    error_of(Client(make_app(metrics="off")).get("/metrics", headers=ADMIN), 404)
