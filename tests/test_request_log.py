"""One line per request on the ``berth.request`` logger: its fields, the caller's global request id,
and the two formats."""

from __future__ import annotations

import logging
import logging.config

import orjson
import pytest
from apihelpers import new_uuid

from berth.web.observability.request_log import JsonFormatter, RequestLine, logging_config

GLOBAL_ID = "req-1b4e28ba-2fa1-41d2-883f-0016d3cca427"


@pytest.fixture
def lines(caplog):
    caplog.set_level(logging.INFO, logger="berth.request")

    def read():
        found = [record.request for record in caplog.records if record.name == "berth.request"]
        caplog.clear()
        return found

    return read


def test_each_request_logs_one_line_with_its_fields(api, lines):
    rp = api.create_provider()
    lines()
    r = api.get(f"/resource_providers/{rp}", token="admin:ops-project")
    (line,) = lines()
    assert line.request_id == r.headers["x-openstack-request-id"]
    assert (line.route, line.method, line.status) == ("/resource_providers/{uuid}", "GET", 200)
    assert line.project == "ops-project" and line.error_code is None and line.global_request_id is None
    assert 0 < line.latency_ms < 10_000


def test_an_error_logs_its_code(api, lines):
    api.delete(f"/resource_providers/{new_uuid()}")
    (line,) = lines()
    assert (line.status, line.error_code) == (404, "placement.undefined_code")
    api.get("/resource_providers", token="")
    (line,) = lines()
    assert (line.route, line.status, line.project) == ("/resource_providers", 401, None)


def test_the_callers_request_id_is_logged_as_the_global_one(api, lines):
    r = api.get("/traits", headers={"X-OpenStack-Request-Id": GLOBAL_ID})
    (line,) = lines()
    assert line.global_request_id == GLOBAL_ID
    # The caller's id is logged, never answered: the service's own id names the request.
    assert r.headers["x-openstack-request-id"] == line.request_id != GLOBAL_ID
    assert f"global_request_id={GLOBAL_ID}" in str(line)


def test_a_malformed_global_request_id_is_dropped(api, lines):
    api.get("/traits", headers={"X-OpenStack-Request-Id": "req-not-a-uuid request_id=forged"})
    (line,) = lines()
    assert line.global_request_id is None


def _line(**changes):
    fields = dict(
        request_id="req-5",
        global_request_id=GLOBAL_ID,
        route="/allocations/{consumer_uuid}",
        method="PUT",
        status=409,
        latency_ms=1.5,
        project="tenant a",
        error_code="placement.concurrent_update",
    )
    fields.update(changes)
    return RequestLine(**fields)


def test_the_text_line_is_key_value_pairs():
    assert str(_line()) == (
        f"request_id=req-5 global_request_id={GLOBAL_ID} route=/allocations/{{consumer_uuid}} method=PUT "
        'status=409 latency_ms=1.50 project="tenant a" error_code=placement.concurrent_update'
    )
    assert str(_line(global_request_id=None, error_code=None, project=None)).endswith("latency_ms=1.50 project=-")


def test_the_json_line_carries_every_field_and_the_time():
    record = logging.LogRecord("berth.request", logging.INFO, __file__, 1, _line(), None, None)
    record.request = _line()
    document = orjson.loads(JsonFormatter().format(record))
    assert document["time"].endswith("+00:00") and document["logger"] == "berth.request"
    assert {k: document[k] for k in ("request_id", "route", "method", "status", "latency_ms", "project")} == {
        "request_id": "req-5",
        "route": "/allocations/{consumer_uuid}",
        "method": "PUT",
        "status": 409,
        "latency_ms": 1.5,
        "project": "tenant a",
    }
    assert document["global_request_id"] == GLOBAL_ID and document["error_code"] == "placement.concurrent_update"


def test_the_servers_json_configuration_writes_json_lines(api, capsys):
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        logging.config.dictConfig(logging_config("json"))
        api.get("/traits")
        logging.getLogger("berth.somewhere").warning("plain message")
    finally:
        for handler in root.handlers:
            root.removeHandler(handler)
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
    written = [orjson.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [(d.get("route"), d.get("status")) for d in written if d["logger"] == "berth.request"] == [("/traits", 200)]
    assert {"logger": "berth.somewhere", "message": "plain message"}.items() <= next(
        d for d in written if d["logger"] == "berth.somewhere"
    ).items()
