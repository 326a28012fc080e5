"""POST /reshaper and the inventories it writes, where a client could tell Berth from OpenStack
Placement 16.0.0: found by sending the same requests to both and comparing. Placement refuses a
reshape for the first of: a provider of the inventories unknown or at another generation, a consumer
at another generation, a provider of the allocations unknown, a resource class unknown (inventories
first, then allocations)."""

from __future__ import annotations

import pytest
from apihelpers import SERVICE_HEADERS, Api, error_code, error_detail, new_uuid


@pytest.fixture
def service(app):
    return Api(app, headers=SERVICE_HEADERS)


def _inventories(provider, generation, inventories):
    return {provider: {"resource_provider_generation": generation, "inventories": inventories}}


def _consumer(allocations, generation):
    return {
        "allocations": {rp: {"resources": resources} for rp, resources in allocations.items()},
        "project_id": "proj",
        "user_id": "user",
        "consumer_generation": generation,
        "consumer_type": "INSTANCE",
    }


def test_a_stale_provider_generation_is_refused_before_an_unknown_class(service):
    rp = service.create_provider(inventory={"VCPU": 8})
    body = {"inventories": _inventories(rp, 99, {"CUSTOM_NOPE": {"total": 1}}), "allocations": {}}
    r = service.post("/reshaper", body)
    assert r.status_code == 409
    assert error_code(r) == "placement.concurrent_update"
    assert error_detail(r).endswith(f"resource provider generation conflict for provider {rp}: actual: 1, given: 99  ")


def test_an_unknown_provider_is_refused_before_an_unknown_class(service):
    missing = new_uuid()
    body = {"inventories": _inventories(missing, 0, {"CUSTOM_NOPE": {"total": 1}}), "allocations": {}}
    r = service.post("/reshaper", body)
    assert r.status_code == 400
    assert error_code(r) == "placement.resource_provider.not_found"
    assert f"Resource provider {missing} in inventories not found" in error_detail(r)


def test_a_stale_consumer_generation_is_refused_before_an_unknown_class_or_provider(service):
    rp = service.create_provider(inventory={"VCPU": 8})
    consumer = new_uuid()
    service.allocate(consumer, {rp: {"VCPU": 1}})
    for allocations in ({rp: {"CUSTOM_NOPE": 1}}, {new_uuid(): {"VCPU": 1}}):
        body = {
            "inventories": _inventories(rp, 2, {"VCPU": {"total": 8}, "CUSTOM_NOPE": {"total": 1}}),
            "allocations": {consumer: _consumer(allocations, 5)},
        }
        r = service.post("/reshaper", body)
        assert r.status_code == 409, r.data
        assert error_detail(r).endswith("consumer generation conflict - expected 1 but got 5  ")


def test_a_missing_provider_of_the_allocations_is_refused_before_an_unknown_class(service):
    rp = service.create_provider(inventory={"VCPU": 8})
    gone = new_uuid()
    body = {
        "inventories": _inventories(rp, 1, {"CUSTOM_NOPE": {"total": 1}}),
        "allocations": {new_uuid(): _consumer({gone: {"VCPU": 1}}, None)},
    }
    r = service.post("/reshaper", body)
    assert r.status_code == 400
    assert error_detail(r).endswith(f"Allocation for resource provider '{gone}' that does not exist.  ")


def test_an_unknown_class_in_the_allocations_is_malformed_reshaper_data(service):
    rp = service.create_provider(inventory={"VCPU": 8})
    body = {
        "inventories": _inventories(rp, 1, {"VCPU": {"total": 8}}),
        "allocations": {new_uuid(): _consumer({rp: {"CUSTOM_X": 1}}, None)},
    }
    r = service.post("/reshaper", body)
    assert r.status_code == 400
    assert error_detail(r).endswith("malformed reshaper data: No such resource class CUSTOM_X.  ")
    # One unknown in the inventories too: that one is named, as Placement writes the inventories first.
    body["inventories"] = _inventories(rp, 1, {"CUSTOM_Y": {"total": 8}})
    r = service.post("/reshaper", body)
    assert error_detail(r).endswith("malformed reshaper data: No such resource class CUSTOM_Y.  ")


def test_an_inventory_record_may_repeat_the_provider_generation(api, service):
    # As GET .../inventories/{class} shows it; Placement's schema allows it in each record, and only
    # the body's own generation counts.
    rp = api.create_provider()
    record = {"total": 8, "resource_provider_generation": 12}
    r = api.put(
        f"/resource_providers/{rp}/inventories", {"resource_provider_generation": 0, "inventories": {"VCPU": record}}
    )
    assert r.status_code == 200, r.data
    assert r.json_body["inventories"]["VCPU"]["total"] == 8
    r = service.post(
        "/reshaper", {"inventories": _inventories(rp, 1, {"VCPU": {**record, "total": 4}}), "allocations": {}}
    )
    assert r.status_code == 204, r.data
    assert api.get(f"/resource_providers/{rp}/inventories/VCPU").json_body["total"] == 4
