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


def _consumer(allocations, generation):
    return {
        "allocations": {rp: {"resources": resources} for rp, resources in allocations.items()},
        "project_id": "p",
        "user_id": "u",
        "consumer_generation": generation,
        "consumer_type": "INSTANCE",
    }


def test_generations_move_as_the_reference_moves_them(api):
    """Placement bumps a provider once for each inventory write (the interim union, skipped for an
    empty new inventory, and the final one) and once in the allocations' step for every provider
    the allocations name, including those a consumer leaves because its allocations become {}
    (placement/objects/reshaper.py, allocation.py ``_set_allocations``)."""
    root = api.create_provider("root", inventory={"VCPU": 8})
    emptied = api.create_provider("gpu", parent=root, inventory={"VGPU": 4})
    idle = api.create_provider("idle", inventory={"DISK_GB": 10})
    emptied_outside = api.create_provider("mem", inventory={"MEMORY_MB": 100})
    left = api.create_provider("left", inventory={"VCPU": 8})
    receiving = api.create_provider("receiving", inventory={"VCPU": 8})
    on_gpu, on_mem, moving, new = new_uuid(), new_uuid(), new_uuid(), new_uuid()
    api.allocate(on_gpu, {emptied: {"VGPU": 1}})
    api.allocate(on_mem, {emptied_outside: {"MEMORY_MB": 10}})
    api.allocate(moving, {left: {"VCPU": 1}})
    providers = [root, emptied, idle, emptied_outside, left, receiving]
    before = {rp: _gen(api, rp) for rp in providers}
    r = api.post(
        "/reshaper",
        {
            "inventories": {
                root: {"resource_provider_generation": before[root], "inventories": {"VCPU": {"total": 16}}},
                emptied: {"resource_provider_generation": before[emptied], "inventories": {}},
                idle: {"resource_provider_generation": before[idle], "inventories": {"DISK_GB": {"total": 20}}},
            },
            "allocations": {
                on_gpu: _consumer({}, 1),
                on_mem: _consumer({}, 1),
                moving: _consumer({root: {"VCPU": 1}}, 1),
                new: _consumer({receiving: {"VCPU": 1}}, None),
            },
        },
    )
    assert r.status_code == 204, r.data
    moved = {rp: _gen(api, rp) - before[rp] for rp in providers}
    assert moved == {root: 3, emptied: 2, idle: 2, emptied_outside: 1, left: 0, receiving: 1}
    # The client's next reshape, at the generations it reads, goes through.
    r = api.post(
        "/reshaper",
        {
            "inventories": {emptied: {"resource_provider_generation": before[emptied] + 2, "inventories": {}}},
            "allocations": {},
        },
    )
    assert r.status_code == 204, r.data
