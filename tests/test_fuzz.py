"""Property-based fuzzing of every operation against the published OpenAPI document, plus hostile
inputs: no 5xx, every status documented, every error in Placement's JSON format."""

import json

import orjson
import pytest
import schemathesis
from apihelpers import Api, new_uuid
from hypothesis import HealthCheck, settings
from schemathesis.core import NOT_SET
from werkzeug.test import Client

from berth.api.app import PlacementApp
from berth.api.routing.openapi import build_document
from berth.api.routing.routes import ROUTES
from berth.web.request_checks import MAX_BODY_BYTES

ADMIN = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement latest"}


@pytest.fixture
def fuzz_app(db):
    return PlacementApp(db)


schema = schemathesis.openapi.from_dict(build_document(ROUTES))


def _error_format(response):
    if response.status_code >= 400:
        body = orjson.loads(response.data)
        error = body["errors"][0]
        assert {"status", "title", "detail", "request_id"} <= set(error), body
        assert error["status"] == response.status_code


@schema.parametrize()
@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_every_operation_survives_generated_input(fuzz_app, case):
    body = None
    if case.body is not NOT_SET:
        body = case.body if isinstance(case.body, bytes) else json.dumps(case.body).encode()
    response = Client(fuzz_app).open(
        case.formatted_path,
        method=case.method,
        query_string=case.query or None,
        headers={**(case.headers or {}), **ADMIN},
        data=body,
        content_type="application/json" if body is not None else None,
    )
    assert response.status_code < 500, response.data
    assert str(response.status_code) in case.operation.definition.raw["responses"], response.status_code
    _error_format(response)


def test_the_document_is_served_without_a_token(fuzz_app):
    r = Api(fuzz_app).get("/berth/openapi.json", token="", version="")
    assert r.status_code == 200
    assert r.json_body == orjson.loads(orjson.dumps(build_document(ROUTES)))
    assert "/allocation_candidates" in r.json_body["paths"]


@pytest.mark.parametrize(
    "value",
    [
        "x' OR '1'='1",
        '"; DROP TABLE resource_providers; --',
        "名前-ünïcødé-🚀",
        "%00",
        "\\x00",
        "a" * 200,
    ],
)
def test_sql_metacharacters_and_unicode_are_plain_data(api, value):
    r = api.post("/resource_providers", {"name": value})
    assert r.status_code == 200, r.data
    uuid = r.json_body["uuid"]
    assert api.get(f"/resource_providers/{uuid}").json_body["name"] == value
    listed = api.get("/resource_providers", headers={}, version="latest")
    assert [p["name"] for p in listed.json_body["resource_providers"]] == [value]
    for path in (
        f"/resource_providers?name={value}",
        f"/traits?name=startswith:{value}",
        f"/usages?project_id={value}",
        f"/allocations/{value}",
        f"/resource_classes/{value}",
        f"/allocation_candidates?resources={value}",
    ):
        assert api.get(path).status_code < 500


def test_huge_body_is_413(api):
    r = api.post("/resource_providers", raw=b'{"name": "' + b"a" * (MAX_BODY_BYTES + 1) + b'"}')
    assert r.status_code == 413 and r.json_body["errors"][0]["status"] == 413


def test_invalid_utf8_is_400(api):
    r = api.post("/resource_providers", raw=b'{"name": "\xff\xfe"}')
    assert r.status_code == 400


def test_huge_integers_are_400_not_500(api):
    rp = api.create_provider("p", inventory={"VCPU": 8})
    for amount in (10**30, 2**31, 2**63):
        body = {
            "allocations": {rp: {"resources": {"VCPU": amount}}},
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": amount,
            "consumer_type": "INSTANCE",
        }
        assert api.put(f"/allocations/{new_uuid()}", raw=json.dumps(body).encode()).status_code == 400
        body = {"resource_provider_generation": amount, "inventories": {"VCPU": {"total": 8}}}
        r = api.put(f"/resource_providers/{rp}/inventories", raw=json.dumps(body).encode())
        assert r.status_code == 400
    assert api.get("/allocation_candidates?resources=VCPU:99999999999999999999999").status_code < 500
    assert api.get("/allocation_candidates?resources=VCPU:1&limit=99999999999999999999999").status_code < 500
