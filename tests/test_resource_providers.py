"""/resource_providers: creation, trees, filters and deletion at their microversion boundaries."""

import pytest
from apihelpers import error_code, error_detail, new_uuid


def test_create_before_1_20_is_201_with_location_and_no_body(api):
    u = new_uuid()
    r = api.post("/resource_providers", {"name": "a", "uuid": u}, version="1.19")
    assert r.status_code == 201
    assert r.headers["Location"].endswith(f"/resource_providers/{u}")
    assert not r.data


def test_create_at_1_20_returns_the_provider(api):
    r = api.post("/resource_providers", {"name": "a"}, version="1.20")
    assert r.status_code == 200
    body = r.json_body
    assert body["name"] == "a" and body["generation"] == 0
    assert body["root_provider_uuid"] == body["uuid"] and body["parent_provider_uuid"] is None
    assert {link["rel"] for link in body["links"]} == {
        "self",
        "inventories",
        "usages",
        "aggregates",
        "traits",
        "allocations",
    }


@pytest.mark.parametrize(
    "version,rels,nested",
    [
        ("1.0", {"self", "inventories", "usages"}, False),
        ("1.1", {"self", "inventories", "usages", "aggregates"}, False),
        ("1.6", {"self", "inventories", "usages", "aggregates", "traits"}, False),
        ("1.11", {"self", "inventories", "usages", "aggregates", "traits", "allocations"}, False),
        ("1.14", {"self", "inventories", "usages", "aggregates", "traits", "allocations"}, True),
    ],
)
def test_links_and_tree_fields_follow_microversion(api, version, rels, nested):
    u = api.create_provider("p")
    body = api.get(f"/resource_providers/{u}", version=version).json_body
    assert {link["rel"] for link in body["links"]} == rels
    assert ("parent_provider_uuid" in body) is nested


def test_duplicate_name_and_uuid_conflict(api):
    u = api.create_provider("same")
    r = api.post("/resource_providers", {"name": "same"})
    assert r.status_code == 409 and error_code(r) == "placement.duplicate_name"
    assert "Conflicting resource provider name: same already exists" in error_detail(r)
    r = api.post("/resource_providers", {"name": "other", "uuid": u})
    assert r.status_code == 409 and f"uuid: {u}" in error_detail(r)


def test_name_too_long_and_bad_uuid_are_400(api):
    assert api.post("/resource_providers", {"name": "x" * 201}).status_code == 400
    assert api.post("/resource_providers", {"name": "x", "uuid": "not-a-uuid"}).status_code == 400


def test_show_missing_is_404(api):
    r = api.get(f"/resource_providers/{new_uuid()}")
    assert r.status_code == 404 and "No resource provider with uuid" in error_detail(r)


def test_update_name(api):
    u = api.create_provider("old")
    r = api.put(f"/resource_providers/{u}", {"name": "new"})
    assert r.status_code == 200 and r.json_body["name"] == "new"
    api.create_provider("taken")
    r = api.put(f"/resource_providers/{u}", {"name": "taken"})
    assert r.status_code == 409 and error_code(r) == "placement.duplicate_name"


def test_nested_tree_and_parent_checks(api):
    root = api.create_provider("root")
    child = api.create_provider("child", parent=root)
    grandchild = api.create_provider("grandchild", parent=child)
    body = api.get(f"/resource_providers/{grandchild}").json_body
    assert body["parent_provider_uuid"] == child and body["root_provider_uuid"] == root
    r = api.post("/resource_providers", {"name": "orphan", "parent_provider_uuid": new_uuid()})
    assert r.status_code == 400 and "parent provider UUID does not exist" in error_detail(r)
    r = api.post("/resource_providers", {"name": "x", "parent_provider_uuid": root}, version="1.13")
    assert r.status_code == 400


def test_reparenting_is_refused_before_1_37_and_allowed_after(api):
    root1 = api.create_provider("root1")
    root2 = api.create_provider("root2")
    child = api.create_provider("child", parent=root1)
    leaf = api.create_provider("leaf", parent=child)
    r = api.put(f"/resource_providers/{child}", {"name": "child", "parent_provider_uuid": root2}, version="1.36")
    assert r.status_code == 400 and "re-parenting a provider is not currently allowed" in error_detail(r)
    r = api.put(f"/resource_providers/{child}", {"name": "child", "parent_provider_uuid": None}, version="1.36")
    assert r.status_code == 400
    r = api.put(f"/resource_providers/{child}", {"name": "child", "parent_provider_uuid": root2}, version="1.37")
    assert r.status_code == 200 and r.json_body["root_provider_uuid"] == root2
    assert api.get(f"/resource_providers/{leaf}").json_body["root_provider_uuid"] == root2
    r = api.put(f"/resource_providers/{child}", {"name": "child", "parent_provider_uuid": None}, version="1.37")
    assert r.status_code == 200 and r.json_body["root_provider_uuid"] == child
    assert api.get(f"/resource_providers/{leaf}").json_body["root_provider_uuid"] == child


def test_a_root_may_gain_a_parent_but_never_a_loop(api):
    a = api.create_provider("a")
    b = api.create_provider("b", parent=a)
    r = api.put(f"/resource_providers/{a}", {"name": "a", "parent_provider_uuid": b}, version="1.37")
    assert r.status_code == 400 and "creating loop in the provider tree is not allowed" in error_detail(r)
    r = api.put(f"/resource_providers/{a}", {"name": "a", "parent_provider_uuid": a}, version="1.37")
    assert r.status_code == 400
    c = api.create_provider("c")
    r = api.put(f"/resource_providers/{c}", {"name": "c", "parent_provider_uuid": b}, version="1.14")
    assert r.status_code == 200 and r.json_body["root_provider_uuid"] == a


def test_delete(api):
    root = api.create_provider("root")
    child = api.create_provider("child", parent=root, inventory={"VCPU": 4})
    r = api.delete(f"/resource_providers/{root}")
    assert r.status_code == 409 and error_code(r) == "placement.resource_provider.cannot_delete_parent"
    consumer = new_uuid()
    api.allocate(consumer, {child: {"VCPU": 1}})
    r = api.delete(f"/resource_providers/{child}")
    assert r.status_code == 409 and error_code(r) == "placement.resource_provider.inuse"
    assert api.delete(f"/allocations/{consumer}").status_code == 204
    assert api.delete(f"/resource_providers/{child}").status_code == 204
    assert api.delete(f"/resource_providers/{root}").status_code == 204
    r = api.delete(f"/resource_providers/{root}")
    assert r.status_code == 404 and "found for delete" in error_detail(r)


def _names(r):
    assert r.status_code == 200, r.data
    return sorted(p["name"] for p in r.json_body["resource_providers"])


def test_filters_name_uuid_and_unknown_parameters(api):
    a = api.create_provider("a")
    api.create_provider("b")
    assert _names(api.get("/resource_providers?name=a")) == ["a"]
    assert _names(api.get(f"/resource_providers?uuid={a}")) == ["a"]
    r = api.get("/resource_providers?uuid=bogus")
    assert r.status_code == 400 and "Invalid query string parameters" in error_detail(r)
    assert api.get("/resource_providers?foo=bar").status_code == 400
    assert api.get("/resource_providers?member_of=x", version="1.2").status_code == 400


def test_filter_in_tree(api):
    root = api.create_provider("root")
    api.create_provider("child", parent=root)
    api.create_provider("other")
    assert _names(api.get(f"/resource_providers?in_tree={root}")) == ["child", "root"]
    assert _names(api.get(f"/resource_providers?in_tree={new_uuid()}")) == []
    assert api.get(f"/resource_providers?in_tree={root}", version="1.13").status_code == 400


def test_filter_member_of(api):
    agg1, agg2, agg3 = new_uuid(), new_uuid(), new_uuid()
    api.create_provider("one", aggregates=[agg1])
    api.create_provider("two", aggregates=[agg2])
    api.create_provider("both", aggregates=[agg1, agg2])
    api.create_provider("none")
    assert _names(api.get(f"/resource_providers?member_of={agg1}")) == ["both", "one"]
    assert _names(api.get(f"/resource_providers?member_of=in:{agg1},{agg3}")) == ["both", "one"]
    assert _names(api.get(f"/resource_providers?member_of={agg1}&member_of={agg2}")) == ["both"]
    r = api.get(f"/resource_providers?member_of={agg1}&member_of={agg2}", version="1.23")
    assert r.status_code == 400
    assert _names(api.get(f"/resource_providers?member_of=!{agg1}")) == ["none", "two"]
    assert _names(api.get(f"/resource_providers?member_of=!in:{agg1},{agg2}")) == ["none"]
    assert api.get(f"/resource_providers?member_of=!{agg1}", version="1.31").status_code == 400
    assert api.get("/resource_providers?member_of=in:notauuid").status_code == 400


def test_filter_resources_checks_capacity_and_units(api):
    api.create_provider("small", inventory={"VCPU": 2, "MEMORY_MB": 1024})
    api.create_provider("big", inventory={"VCPU": {"total": 16, "max_unit": 8}, "MEMORY_MB": 8192})
    full = api.create_provider("full", inventory={"VCPU": 4})
    api.allocate(new_uuid(), {full: {"VCPU": 4}})
    assert _names(api.get("/resource_providers?resources=VCPU:2")) == ["big", "small"]
    assert _names(api.get("/resource_providers?resources=VCPU:4,MEMORY_MB:2048")) == ["big"]
    assert _names(api.get("/resource_providers?resources=VCPU:9")) == []
    r = api.get("/resource_providers?resources=VCPU")
    assert r.status_code == 400 and "Badly formed resources parameter" in error_detail(r)
    r = api.get("/resource_providers?resources=VCPU:0")
    assert r.status_code == 400
    r = api.get("/resource_providers?resources=CUSTOM_NOPE:1")
    assert r.status_code == 400 and "CUSTOM_NOPE" in error_detail(r)


def test_filter_required_and_forbidden_traits(api):
    api.create_provider("avx", traits=["HW_CPU_X86_AVX"])
    api.create_provider("avx2", traits=["HW_CPU_X86_AVX", "HW_CPU_X86_AVX2"])
    api.create_provider("ssd", traits=["STORAGE_DISK_SSD"])
    assert _names(api.get("/resource_providers?required=HW_CPU_X86_AVX")) == ["avx", "avx2"]
    assert _names(api.get("/resource_providers?required=HW_CPU_X86_AVX,!HW_CPU_X86_AVX2")) == ["avx"]
    assert api.get("/resource_providers?required=!HW_CPU_X86_AVX2", version="1.21").status_code == 400
    assert _names(api.get("/resource_providers?required=in:HW_CPU_X86_AVX2,STORAGE_DISK_SSD")) == ["avx2", "ssd"]
    assert _names(api.get("/resource_providers?required=HW_CPU_X86_AVX&required=!HW_CPU_X86_AVX2")) == ["avx"]
    r = api.get("/resource_providers?required=CUSTOM_MISSING")
    assert r.status_code == 400 and "No such trait(s): CUSTOM_MISSING" in error_detail(r)
    assert api.get("/resource_providers?required=HW_CPU_X86_AVX", version="1.17").status_code == 400


def test_a_refused_duplicate_writes_nothing_and_the_next_creation_works(api):
    u = api.create_provider("first")
    assert api.post("/resource_providers", {"name": "first", "uuid": new_uuid()}).status_code == 409
    r = api.post("/resource_providers", {"name": "first", "uuid": u})
    assert r.status_code == 409
    assert f"uuid: {u}" in error_detail(r) and "name: first" in error_detail(r)
    names = [p["name"] for p in api.get("/resource_providers").json_body["resource_providers"]]
    assert names == ["first"]
    assert api.post("/resource_providers", {"name": "second"}).status_code in (200, 201)
