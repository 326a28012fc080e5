"""/resource_providers/{uuid}/inventories: defaults, validation, generations and in-use guards."""

import pytest
from apihelpers import error_code, error_detail, new_uuid


def _gen(api, u):
    return api.get(f"/resource_providers/{u}").json_body["generation"]


def test_put_inventories_applies_defaults_and_bumps_generation(api):
    u = api.create_provider("p")
    r = api.put(
        f"/resource_providers/{u}/inventories",
        {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}},
    )
    assert r.status_code == 200
    assert r.json_body == {
        "resource_provider_generation": 1,
        "inventories": {
            "VCPU": {
                "total": 8,
                "reserved": 0,
                "min_unit": 1,
                "max_unit": 2147483647,
                "step_size": 1,
                "allocation_ratio": 1.0,
            }
        },
    }
    listed = api.get(f"/resource_providers/{u}/inventories").json_body
    assert listed == r.json_body


def test_stale_generation_is_409_concurrent_update(api):
    u = api.create_provider("p", inventory={"VCPU": 8})
    r = api.put(
        f"/resource_providers/{u}/inventories",
        {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}},
    )
    assert r.status_code == 409 and error_code(r) == "placement.concurrent_update"
    assert api.get(f"/resource_providers/{u}/inventories/VCPU").json_body["total"] == 8


@pytest.mark.parametrize(
    "bad",
    [
        {"total": 0},
        {"total": -1},
        {"total": 2147483648},
        {"total": 1, "reserved": -1},
        {"total": 1, "min_unit": 0},
        {"total": 1, "step_size": 0},
        {"total": "8"},
        {"reserved": 1},
        {"total": 1, "bogus": 1},
    ],
)
def test_invalid_records_are_400(api, bad):
    u = api.create_provider("p")
    r = api.put(
        f"/resource_providers/{u}/inventories", {"resource_provider_generation": 0, "inventories": {"VCPU": bad}}
    )
    assert r.status_code == 400, r.data


def test_reserved_equal_total_allowed_from_1_26(api):
    u = api.create_provider("p")
    body = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4, "reserved": 4}}}
    r = api.put(f"/resource_providers/{u}/inventories", body, version="1.25")
    assert r.status_code == 400
    r = api.put(f"/resource_providers/{u}/inventories", body, version="1.26")
    assert r.status_code == 200
    body = {"resource_provider_generation": 1, "inventories": {"VCPU": {"total": 4, "reserved": 5}}}
    assert api.put(f"/resource_providers/{u}/inventories", body).status_code == 400


def test_unknown_resource_class_is_400(api):
    u = api.create_provider("p")
    r = api.put(
        f"/resource_providers/{u}/inventories",
        {"resource_provider_generation": 0, "inventories": {"CUSTOM_NOPE": {"total": 1}}},
    )
    assert r.status_code == 400 and "CUSTOM_NOPE" in error_detail(r)


def test_post_show_update_delete_single_inventory(api):
    u = api.create_provider("p")
    r = api.post(
        f"/resource_providers/{u}/inventories",
        {"resource_class": "DISK_GB", "total": 100, "resource_provider_generation": 0},
    )
    assert r.status_code == 201
    assert r.headers["Location"].endswith(f"/resource_providers/{u}/inventories/DISK_GB")
    assert r.json_body["resource_provider_generation"] == 1 and r.json_body["total"] == 100
    r = api.post(
        f"/resource_providers/{u}/inventories",
        {"resource_class": "DISK_GB", "total": 100, "resource_provider_generation": 1},
    )
    assert r.status_code == 409
    r = api.get(f"/resource_providers/{u}/inventories/DISK_GB")
    assert r.status_code == 200 and r.json_body["total"] == 100
    assert api.get(f"/resource_providers/{u}/inventories/VCPU").status_code == 404
    r = api.put(
        f"/resource_providers/{u}/inventories/DISK_GB",
        {"total": 200, "reserved": 10, "resource_provider_generation": 1},
    )
    assert r.status_code == 200 and r.json_body["total"] == 200 and r.json_body["resource_provider_generation"] == 2
    r = api.put(f"/resource_providers/{u}/inventories/VCPU", {"total": 2, "resource_provider_generation": 2})
    assert r.status_code == 400, "updating a class without inventory is refused, as the reference does"
    assert api.delete(f"/resource_providers/{u}/inventories/DISK_GB").status_code == 204
    assert api.delete(f"/resource_providers/{u}/inventories/DISK_GB").status_code == 404
    assert _gen(api, u) == 3


def test_in_use_inventory_cannot_be_removed_but_may_shrink_below_usage(api):
    u = api.create_provider("p", inventory={"VCPU": 8, "MEMORY_MB": 1024})
    api.allocate(new_uuid(), {u: {"VCPU": 6, "MEMORY_MB": 10}})
    r = api.delete(f"/resource_providers/{u}/inventories/VCPU")
    assert r.status_code == 409 and error_code(r) == "placement.inventory.inuse"
    gen = _gen(api, u)
    r = api.put(
        f"/resource_providers/{u}/inventories",
        {"resource_provider_generation": gen, "inventories": {"DISK_GB": {"total": 1024}}},
    )
    assert r.status_code == 409 and error_code(r) == "placement.inventory.inuse"
    assert "'VCPU, MEMORY_MB'" in error_detail(r)
    # Refused whole: nothing added, and the generation did not move.
    after = api.get(f"/resource_providers/{u}/inventories").json_body
    assert after["resource_provider_generation"] == gen and sorted(after["inventories"]) == ["MEMORY_MB", "VCPU"]
    assert api.delete(f"/resource_providers/{u}/inventories", version="1.5").status_code == 409
    # As the reference: a host may report less than is allocated (a disk shrank, a reservation grew);
    # nothing more fits until usage is back under capacity.
    r = api.put(
        f"/resource_providers/{u}/inventories",
        {"resource_provider_generation": gen, "inventories": {"VCPU": {"total": 4}, "MEMORY_MB": {"total": 1024}}},
    )
    assert r.status_code == 200
    api.allocate(new_uuid(), {u: {"VCPU": 1}}, expect=409)
    assert api.get(f"/resource_providers/{u}/usages").json_body["usages"]["VCPU"] == 6


def test_delete_all_inventories_from_1_5(api):
    u = api.create_provider("p", inventory={"VCPU": 8, "DISK_GB": 10})
    assert api.delete(f"/resource_providers/{u}/inventories", version="1.4").status_code == 405
    assert api.delete(f"/resource_providers/{u}/inventories", version="1.5").status_code == 204
    assert api.get(f"/resource_providers/{u}/inventories").json_body["inventories"] == {}


def test_inventory_of_missing_provider_is_404(api):
    assert api.get(f"/resource_providers/{new_uuid()}/inventories").status_code == 404


def test_put_answer_equals_what_is_read_back_with_several_classes(api):
    u = api.create_provider("p")
    api.post("/resource_classes", {"name": "CUSTOM_FPGA"})
    body = {
        "resource_provider_generation": 0,
        "inventories": {
            "CUSTOM_FPGA": {"total": 2},
            "VCPU": {"total": 8, "allocation_ratio": 4},
            "DISK_GB": {"total": 100, "reserved": 10, "step_size": 10, "min_unit": 10, "max_unit": 50},
        },
    }
    r = api.put(f"/resource_providers/{u}/inventories", body)
    assert r.status_code == 200, r.data
    assert r.json_body == api.get(f"/resource_providers/{u}/inventories").json_body
    assert r.json_body["inventories"]["VCPU"]["allocation_ratio"] == 4.0


def test_a_custom_class_deleted_and_created_again_is_not_confused_with_another(api):
    # Custom class ids are looked up on every write: after CUSTOM_B is deleted, its id may be
    # given to the next class created, and the re-created CUSTOM_B gets another one.
    u = api.create_provider("p")
    api.post("/resource_classes", {"name": "CUSTOM_B"})
    r = api.put(
        f"/resource_providers/{u}/inventories",
        {"resource_provider_generation": 0, "inventories": {"CUSTOM_B": {"total": 1}}},
    )
    assert r.status_code == 200, r.data
    assert api.delete(f"/resource_providers/{u}/inventories").status_code == 204
    assert api.delete("/resource_classes/CUSTOM_B").status_code == 204
    api.post("/resource_classes", {"name": "CUSTOM_C"})
    api.post("/resource_classes", {"name": "CUSTOM_B"})
    r = api.put(
        f"/resource_providers/{u}/inventories",
        {"resource_provider_generation": _gen(api, u), "inventories": {"CUSTOM_B": {"total": 3}}},
    )
    assert r.status_code == 200, r.data
    assert api.get(f"/resource_providers/{u}/inventories").json_body["inventories"] == {
        "CUSTOM_B": {
            "total": 3,
            "reserved": 0,
            "min_unit": 1,
            "max_unit": 2147483647,
            "step_size": 1,
            "allocation_ratio": 1.0,
        }
    }


def test_put_checks_provider_then_classes_then_generation(api):
    # As in the reference: 404 for an unknown provider whatever the body, then 400 for a class that
    # does not exist even with a stale generation, then 409 for the stale generation alone.
    body = {"resource_provider_generation": 7, "inventories": {"CUSTOM_NOPE": {"total": 1}}}
    r = api.put(f"/resource_providers/{new_uuid()}/inventories", body)
    assert r.status_code == 404, r.data
    u = api.create_provider("p", inventory={"VCPU": 8})
    r = api.put(f"/resource_providers/{u}/inventories", body)
    assert r.status_code == 400 and "CUSTOM_NOPE" in error_detail(r), r.data
    r = api.put(
        f"/resource_providers/{u}/inventories",
        {"resource_provider_generation": 7, "inventories": {"VCPU": {"total": 1}}},
    )
    assert r.status_code == 409 and error_code(r) == "placement.concurrent_update"
    assert api.get(f"/resource_providers/{u}/inventories/VCPU").json_body["total"] == 8
    r = api.put(
        f"/resource_providers/{u}/inventories",
        {"resource_provider_generation": _gen(api, u), "inventories": {"VCPU": {"total": 1, "reserved": 2}}},
    )
    assert r.status_code == 400
    assert _gen(api, u) == 1, "a refused write leaves the generation alone"
