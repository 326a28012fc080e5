"""/allocations: formats of every microversion, consumer generations, capacity and atomicity."""

import pytest
from apihelpers import error_code, error_detail, new_uuid


def _usage(api, u):
    return api.get(f"/resource_providers/{u}/usages").json_body["usages"]


def test_list_format_before_1_12_and_dict_view(api):
    rp = api.create_provider("p", inventory={"VCPU": 8, "MEMORY_MB": 2048})
    c = new_uuid()
    body = {"allocations": [{"resource_provider": {"uuid": rp}, "resources": {"VCPU": 2, "MEMORY_MB": 512}}]}
    assert api.put(f"/allocations/{c}", body, version="1.0").status_code == 204
    r = api.get(f"/allocations/{c}", version="1.0")
    assert r.json_body == {"allocations": {rp: {"generation": 2, "resources": {"VCPU": 2, "MEMORY_MB": 512}}}}
    assert _usage(api, rp) == {"VCPU": 2, "MEMORY_MB": 512}


def test_project_and_user_required_from_1_8(api):
    rp = api.create_provider("p", inventory={"VCPU": 8})
    body = {"allocations": [{"resource_provider": {"uuid": rp}, "resources": {"VCPU": 1}}]}
    assert api.put(f"/allocations/{new_uuid()}", body, version="1.8").status_code == 400
    body.update(project_id="p1", user_id="u1")
    assert api.put(f"/allocations/{new_uuid()}", body, version="1.8").status_code == 204
    assert api.put(f"/allocations/{new_uuid()}", body, version="1.12").status_code == 400


def test_dict_format_and_consumer_view_by_version(api):
    rp = api.create_provider("p", inventory={"VCPU": 8})
    c = new_uuid()
    body = {"allocations": {rp: {"resources": {"VCPU": 1}}}, "project_id": "p1", "user_id": "u1"}
    assert api.put(f"/allocations/{c}", body, version="1.12").status_code == 204
    r = api.get(f"/allocations/{c}", version="1.12").json_body
    assert (r["project_id"], r["user_id"]) == ("p1", "u1") and "consumer_generation" not in r
    r = api.get(f"/allocations/{c}", version="1.28").json_body
    assert r["consumer_generation"] == 1 and "consumer_type" not in r
    r = api.get(f"/allocations/{c}", version="1.38").json_body
    assert r["consumer_type"] == "unknown"


def test_consumer_generation_rules(api):
    rp = api.create_provider("p", inventory={"VCPU": 8})
    c = new_uuid()
    r = api.allocate(c, {rp: {"VCPU": 1}}, generation=5, expect=409)
    assert error_code(r) == "placement.concurrent_update"
    assert "consumer generation conflict" in error_detail(r)
    api.allocate(c, {rp: {"VCPU": 1}}, generation=None)
    r = api.allocate(c, {rp: {"VCPU": 2}}, generation=None, expect=409)
    assert "consumer generation conflict" in error_detail(r)
    api.allocate(c, {rp: {"VCPU": 2}}, generation=1)
    r = api.allocate(c, {rp: {"VCPU": 3}}, generation=1, expect=409)
    assert "consumer generation conflict" in error_detail(r)
    assert api.get(f"/allocations/{c}").json_body["consumer_generation"] == 2
    assert _usage(api, rp) == {"VCPU": 2}


def test_empty_allocations_remove_the_consumer_from_1_28(api):
    rp = api.create_provider("p", inventory={"VCPU": 8})
    c = new_uuid()
    api.allocate(c, {rp: {"VCPU": 3}})
    body = {"allocations": {}, "project_id": "p", "user_id": "u", "consumer_generation": 1, "consumer_type": "INSTANCE"}
    assert api.put(f"/allocations/{c}", body).status_code == 204
    assert api.get(f"/allocations/{c}").json_body == {"allocations": {}}
    assert _usage(api, rp) == {"VCPU": 0}
    body = {"allocations": {}, "project_id": "p", "user_id": "u"}
    assert api.put(f"/allocations/{c}", body, version="1.27").status_code == 400


def test_capacity_is_exact(api):
    rp = api.create_provider("p", inventory={"VCPU": {"total": 10, "reserved": 2, "allocation_ratio": 1.5}})
    api.allocate(new_uuid(), {rp: {"VCPU": 12}})
    r = api.allocate(new_uuid(), {rp: {"VCPU": 1}}, expect=409)
    assert "exceed the capacity" in error_detail(r)
    assert _usage(api, rp) == {"VCPU": 12}


def test_one_class_without_room_refuses_the_whole_claim_and_names_that_class(api):
    host = api.create_provider("host", inventory={"VCPU": 8, "MEMORY_MB": 100, "DISK_GB": 50})
    other = api.create_provider("other", inventory={"DISK_GB": 50})
    api.allocate(new_uuid(), {host: {"MEMORY_MB": 90}})
    consumer = new_uuid()
    r = api.allocate(consumer, {host: {"VCPU": 1, "MEMORY_MB": 20}, other: {"DISK_GB": 5}}, expect=409)
    assert "MEMORY_MB" in error_detail(r) and host in error_detail(r)
    assert _usage(api, host) == {"VCPU": 0, "MEMORY_MB": 90, "DISK_GB": 0}
    assert _usage(api, other) == {"DISK_GB": 0}
    assert api.get(f"/allocations/{consumer}").json_body["allocations"] == {}
    api.allocate(consumer, {host: {"VCPU": 1, "MEMORY_MB": 10}, other: {"DISK_GB": 5}})
    assert _usage(api, host) == {"VCPU": 1, "MEMORY_MB": 100, "DISK_GB": 0}
    assert _usage(api, other) == {"DISK_GB": 5}


def test_unit_constraints(api):
    rp = api.create_provider("p", inventory={"VCPU": {"total": 16, "min_unit": 2, "max_unit": 8, "step_size": 2}})
    for amount in (1, 3, 10):
        r = api.allocate(new_uuid(), {rp: {"VCPU": amount}}, expect=409)
        assert "violate inventory constraints" in error_detail(r)
    api.allocate(new_uuid(), {rp: {"VCPU": 8}})


@pytest.mark.parametrize(
    ("amounts", "fits"),
    [
        ((4, 6), True),  # each a multiple of the step, within the bounds: their sum (10) is above max_unit
        ((4, 5), False),  # 5 is not a multiple of the step, though 4 and 5 have no common factor but 1
        ((6, 2), True),
        ((2, 10), False),  # 10 is above max_unit
        ((8, 1), False),  # 1 is below min_unit
    ],
)
def test_the_unit_constraints_hold_for_each_allocation_of_a_write_not_their_sum(api, amounts, fits):
    rp = api.create_provider("p", inventory={"VCPU": {"total": 32, "min_unit": 2, "max_unit": 8, "step_size": 2}})
    common = {"project_id": "p", "user_id": "u", "consumer_generation": None, "consumer_type": "INSTANCE"}
    body = {new_uuid(): {"allocations": {rp: {"resources": {"VCPU": amount}}}, **common} for amount in amounts}
    r = api.post("/allocations", body)
    if fits:
        assert r.status_code == 204
        assert _usage(api, rp) == {"VCPU": sum(amounts)}
    else:
        assert r.status_code == 409 and "violate inventory constraints" in error_detail(r)
        assert _usage(api, rp) == {"VCPU": 0}


def test_unknown_provider_class_or_missing_inventory(api):
    rp = api.create_provider("p", inventory={"VCPU": 8})
    r = api.allocate(new_uuid(), {new_uuid(): {"VCPU": 1}}, expect=400)
    assert "that does not exist" in error_detail(r)
    r = api.allocate(new_uuid(), {rp: {"CUSTOM_NOPE": 1}}, expect=400)
    r = api.allocate(new_uuid(), {rp: {"DISK_GB": 1}}, expect=409)
    assert "invalid" in error_detail(r)


def test_a_failing_provider_leaves_nothing_written(api):
    compute = api.create_provider("compute", inventory={"VCPU": 8})
    disk = api.create_provider("disk", inventory={"DISK_GB": 10})
    c = new_uuid()
    api.allocate(c, {compute: {"VCPU": 1}})
    api.allocate(new_uuid(), {compute: {"VCPU": 4}, disk: {"DISK_GB": 11}}, expect=409)
    api.allocate(c, {compute: {"VCPU": 4}, disk: {"DISK_GB": 11}}, generation=1, expect=409)
    assert _usage(api, compute) == {"VCPU": 1} and _usage(api, disk) == {"DISK_GB": 0}
    assert api.get(f"/allocations/{c}").json_body["allocations"][compute]["resources"] == {"VCPU": 1}


def test_replacing_allocations_frees_the_old_ones(api):
    a = api.create_provider("a", inventory={"VCPU": 4})
    b = api.create_provider("b", inventory={"VCPU": 4})
    c = new_uuid()
    api.allocate(c, {a: {"VCPU": 4}})
    api.allocate(c, {b: {"VCPU": 4}}, generation=1)
    assert _usage(api, a) == {"VCPU": 0} and _usage(api, b) == {"VCPU": 4}
    api.allocate(new_uuid(), {a: {"VCPU": 4}})


def test_post_allocations_moves_atomically_between_consumers(api):
    src = api.create_provider("src", inventory={"VCPU": 4})
    dst = api.create_provider("dst", inventory={"VCPU": 4})
    instance, migration = new_uuid(), new_uuid()
    api.allocate(instance, {src: {"VCPU": 4}})
    common = {"project_id": "p", "user_id": "u"}
    body = {
        migration: {
            "allocations": {src: {"resources": {"VCPU": 4}}},
            "consumer_generation": None,
            "consumer_type": "MIGRATION",
            **common,
        },
        instance: {
            "allocations": {dst: {"resources": {"VCPU": 4}}},
            "consumer_generation": 1,
            "consumer_type": "INSTANCE",
            **common,
        },
    }
    assert api.post("/allocations", body).status_code == 204
    assert list(api.get(f"/allocations/{migration}").json_body["allocations"]) == [src]
    assert list(api.get(f"/allocations/{instance}").json_body["allocations"]) == [dst]
    assert _usage(api, src) == {"VCPU": 4} and _usage(api, dst) == {"VCPU": 4}
    body = {migration: {"allocations": {}, "consumer_generation": 1, "consumer_type": "MIGRATION", **common}}
    assert api.post("/allocations", body).status_code == 204
    assert _usage(api, src) == {"VCPU": 0}
    assert api.post("/allocations", body, version="1.12").status_code == 404


def test_post_allocations_all_or_nothing(api):
    rp = api.create_provider("p", inventory={"VCPU": 4})
    common = {"project_id": "p", "user_id": "u", "consumer_generation": None, "consumer_type": "INSTANCE"}
    body = {
        new_uuid(): {"allocations": {rp: {"resources": {"VCPU": 2}}}, **common},
        new_uuid(): {"allocations": {rp: {"resources": {"VCPU": 3}}}, **common},
    }
    assert api.post("/allocations", body).status_code == 409
    assert _usage(api, rp) == {"VCPU": 0}


def test_delete_allocations(api):
    rp = api.create_provider("p", inventory={"VCPU": 4})
    c = new_uuid()
    api.allocate(c, {rp: {"VCPU": 2}})
    assert api.delete(f"/allocations/{c}").status_code == 204
    r = api.delete(f"/allocations/{c}")
    assert r.status_code == 404 and "No allocations for consumer" in error_detail(r)
    assert _usage(api, rp) == {"VCPU": 0}


def test_provider_allocations_view(api):
    rp = api.create_provider("p", inventory={"VCPU": 8, "MEMORY_MB": 1024})
    c1, c2 = new_uuid(), new_uuid()
    api.allocate(c1, {rp: {"VCPU": 1, "MEMORY_MB": 128}})
    api.allocate(c2, {rp: {"VCPU": 2}})
    r = api.get(f"/resource_providers/{rp}/allocations").json_body
    # Each consumer's generation from 1.28 on, as Placement answers.
    assert r["allocations"] == {
        c1: {"resources": {"VCPU": 1, "MEMORY_MB": 128}, "consumer_generation": 1},
        c2: {"resources": {"VCPU": 2}, "consumer_generation": 1},
    }
    assert r["resource_provider_generation"] == api.get(f"/resource_providers/{rp}").json_body["generation"]


def test_consumer_type_and_owner_can_change(api):
    rp = api.create_provider("p", inventory={"VCPU": 8})
    c = new_uuid()
    api.allocate(c, {rp: {"VCPU": 1}}, project="p1", user="u1", consumer_type="INSTANCE")
    api.allocate(c, {rp: {"VCPU": 1}}, project="p2", user="u2", consumer_type="MIGRATION", generation=1)
    r = api.get(f"/allocations/{c}").json_body
    assert (r["project_id"], r["user_id"], r["consumer_type"]) == ("p2", "u2", "MIGRATION")


@pytest.mark.parametrize(
    "owners",
    [
        ("p1", "u1", "INSTANCE"),  # all three known
        ("p1", "u1", "BACKUP"),  # a type not seen before
        ("p1", "u2", "INSTANCE"),  # a new user
        ("p2", "u1", "INSTANCE"),  # a new project
    ],
)
def test_a_new_consumer_is_created_with_its_owners_whichever_of_them_exist_already(api, owners):
    rp = api.create_provider("p", inventory={"VCPU": 8})
    api.allocate(new_uuid(), {rp: {"VCPU": 1}}, project="p1", user="u1", consumer_type="INSTANCE")
    project, user, consumer_type = owners
    c = new_uuid()
    api.allocate(c, {rp: {"VCPU": 1}}, project=project, user=user, consumer_type=consumer_type)
    r = api.get(f"/allocations/{c}").json_body
    assert (r["project_id"], r["user_id"], r["consumer_type"]) == (project, user, consumer_type)
    assert r["allocations"][rp]["resources"] == {"VCPU": 1}


def test_bad_consumer_uuid_and_bad_amounts(api):
    rp = api.create_provider("p", inventory={"VCPU": 8})
    assert api.allocate("not-a-uuid", {rp: {"VCPU": 1}}, expect=400)
    api.allocate(new_uuid(), {rp: {"VCPU": 0}}, expect=400)
    api.allocate(new_uuid(), {rp: {"VCPU": -1}}, expect=400)
    api.allocate(new_uuid(), {rp: {}}, expect=400)


def test_a_claim_moves_the_generation_of_each_provider_it_takes_from_once(api):
    host = api.create_provider("host", inventory={"VCPU": 8, "MEMORY_MB": 100})
    disk = api.create_provider("disk", inventory={"DISK_GB": 50})
    idle = api.create_provider("idle", inventory={"VCPU": 8})

    def generations():
        return {u: api.get(f"/resource_providers/{u}").json_body["generation"] for u in (host, disk, idle)}

    before = generations()
    api.allocate(new_uuid(), {host: {"VCPU": 2, "MEMORY_MB": 10}, disk: {"DISK_GB": 5}})
    after = generations()
    assert after == {host: before[host] + 1, disk: before[disk] + 1, idle: before[idle]}
