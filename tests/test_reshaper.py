"""POST /reshaper: inventory and allocations move inside a tree in one transaction."""

import pytest
from apihelpers import SERVICE_HEADERS, Api, error_code, new_uuid


@pytest.fixture
def api(app):
    # Reshaping is a service's (nova-compute's) request: under the default rules it needs the service role.
    return Api(app, headers=SERVICE_HEADERS)


def _gen(api, u):
    return api.get(f"/resource_providers/{u}").json_body["generation"]


def _reshape_vgpu_to_child(api, root, child, consumer, *, root_gen=None, consumer_gen=1):
    return api.post(
        "/reshaper",
        {
            "inventories": {
                root: {
                    "resource_provider_generation": _gen(api, root) if root_gen is None else root_gen,
                    "inventories": {"VCPU": {"total": 8}},
                },
                child: {"resource_provider_generation": _gen(api, child), "inventories": {"VGPU": {"total": 4}}},
            },
            "allocations": {
                consumer: {
                    "allocations": {root: {"resources": {"VCPU": 2}}, child: {"resources": {"VGPU": 1}}},
                    "project_id": "p",
                    "user_id": "u",
                    "consumer_generation": consumer_gen,
                    "consumer_type": "INSTANCE",
                },
            },
        },
    )


def test_move_vgpu_inventory_and_its_allocation_to_a_child(api):
    root = api.create_provider("cn", inventory={"VCPU": 8, "VGPU": 4})
    consumer = new_uuid()
    api.allocate(consumer, {root: {"VCPU": 2, "VGPU": 1}})
    child = api.create_provider("gpu0", parent=root)
    r = _reshape_vgpu_to_child(api, root, child, consumer)
    assert r.status_code == 204, r.data
    assert api.get(f"/resource_providers/{root}/usages").json_body["usages"] == {"VCPU": 2}
    assert api.get(f"/resource_providers/{child}/usages").json_body["usages"] == {"VGPU": 1}
    assert api.get(f"/allocations/{consumer}").json_body["consumer_generation"] == 2


def test_stale_generations_change_nothing(api):
    root = api.create_provider("cn", inventory={"VCPU": 8, "VGPU": 4})
    consumer = new_uuid()
    api.allocate(consumer, {root: {"VCPU": 2, "VGPU": 1}})
    child = api.create_provider("gpu0", parent=root)
    r = _reshape_vgpu_to_child(api, root, child, consumer, root_gen=0)
    assert r.status_code == 409 and error_code(r) == "placement.concurrent_update"
    r = _reshape_vgpu_to_child(api, root, child, consumer, consumer_gen=7)
    assert r.status_code == 409
    assert api.get(f"/resource_providers/{root}/usages").json_body["usages"] == {"VCPU": 2, "VGPU": 1}
    assert api.get(f"/resource_providers/{child}/inventories").json_body["inventories"] == {}


def test_over_capacity_after_reshape_is_refused(api):
    root = api.create_provider("cn", inventory={"VCPU": 8, "VGPU": 4})
    consumer = new_uuid()
    api.allocate(consumer, {root: {"VCPU": 2, "VGPU": 1}})
    child = api.create_provider("gpu0", parent=root)
    r = api.post(
        "/reshaper",
        {
            "inventories": {
                child: {"resource_provider_generation": 0, "inventories": {"VGPU": {"total": 1}}},
                root: {"resource_provider_generation": _gen(api, root), "inventories": {"VCPU": {"total": 8}}},
            },
            "allocations": {
                consumer: {
                    "allocations": {child: {"resources": {"VGPU": 2}}, root: {"resources": {"VCPU": 2}}},
                    "project_id": "p",
                    "user_id": "u",
                    "consumer_generation": 1,
                    "consumer_type": "INSTANCE",
                }
            },
        },
    )
    assert r.status_code == 409
    assert api.get(f"/resource_providers/{root}/usages").json_body["usages"] == {"VCPU": 2, "VGPU": 1}


def test_reshaper_needs_1_30_and_a_valid_body(api):
    assert api.post("/reshaper", {"inventories": {}, "allocations": {}}, version="1.29").status_code == 404
    assert api.post("/reshaper", {"inventories": {}, "allocations": {}}).status_code == 400
