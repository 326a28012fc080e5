"""Cases where a client could tell Berth from OpenStack Placement, found by sending the same odd
requests to both (Placement 16.0.0 on SQLite, noauth2) and comparing the answers: microversion
headers, paths, names, numbers, headers and bodies at their edges."""

from __future__ import annotations

import pytest
from apihelpers import error_detail, new_uuid


def _message(response):
    """The detail's own message, after the status title."""
    return error_detail(response).split("\n\n", 1)[-1].strip()


# --- the microversion header, read as Placement's microversion-parse reads it -----------------------


@pytest.mark.parametrize(
    ("value", "status", "answered"),
    [
        ("1.5", 200, "1.5"),
        ("latest", 200, "1.39"),
        # "latest" is a keyword in lower case only; any other spelling is a malformed version.
        ("LATEST", 400, None),
        ("Latest", 400, None),
        # Everything after the service's name is the version: a trailing word makes it malformed.
        ("1.5 extra", 400, None),
        # Each side of the dot is read as a number, so a sign makes a well-formed version out of range.
        ("1.-1", 406, None),
        ("1.+5", 200, "1.5"),
        ("01.05", 200, "1.5"),
        ("1", 400, None),
        ("1.40", 406, None),
    ],
)
def test_the_microversion_header_is_read_as_placement_reads_it(api, value, status, answered):
    r = api.get("/resource_providers", version=value)
    assert r.status_code == status, r.data
    if answered is not None:
        assert r.headers["OpenStack-API-Version"] == f"placement {answered}"


def test_the_last_placement_entry_of_the_header_counts(api):
    r = api.get("/", version=None, headers={"OpenStack-API-Version": "placement 1.2, compute 2.1, placement 1.3"})
    assert r.headers["OpenStack-API-Version"] == "placement 1.3"


# --- paths: Placement serves none of its paths with a final or doubled slash ------------------------


@pytest.mark.parametrize(
    "path", ["/resource_providers/", "/traits/", "/resource_classes/", "/allocations/", "/usages/", "//", "//traits"]
)
def test_a_path_with_a_final_or_doubled_slash_is_not_found(api, path):
    # The path as the server receives it (a test client would read "//traits" as a host's name).
    r = api.client.get(
        "/",
        environ_overrides={"PATH_INFO": path},
        headers={"X-Auth-Token": "admin", "OpenStack-API-Version": "placement latest"},
    )
    assert r.status_code == 404, r.data
    assert r.json["errors"][0]["code"] == "placement.undefined_code"


def test_the_same_paths_without_the_slash_are_served(api):
    for path in ("/", "/resource_providers", "/traits", "/resource_classes"):
        assert api.get(path).status_code == 200, path


# --- names ----------------------------------------------------------------------------------------


def test_a_provider_is_not_created_without_a_name(api):
    uuid = new_uuid()
    r = api.post("/resource_providers", {"name": "", "uuid": uuid, "parent_provider_uuid": new_uuid()})
    assert r.status_code == 400, r.data
    assert _message(r) == (
        f'Unable to create resource provider "", {uuid}: Object action create failed because: name is required'
    )
    assert api.get(f"/resource_providers/{uuid}").status_code == 404


def test_an_empty_name_filters_no_provider_out(api):
    host = api.create_provider("host")
    listed = api.get("/resource_providers?name=").json_body["resource_providers"]
    assert [p["uuid"] for p in listed] == [host]


def test_renaming_a_class_to_its_own_name_is_a_rename(api):
    assert api.post("/resource_classes", {"name": "CUSTOM_GOLD"}).status_code == 201
    r = api.put("/resource_classes/CUSTOM_GOLD", {"name": "CUSTOM_GOLD"}, version="1.6")
    assert r.status_code == 200, r.data
    assert r.json_body["name"] == "CUSTOM_GOLD"
    # A clash with another class is still refused.
    assert api.post("/resource_classes", {"name": "CUSTOM_SILVER"}).status_code == 201
    r = api.put("/resource_classes/CUSTOM_GOLD", {"name": "CUSTOM_SILVER"}, version="1.6")
    assert r.status_code == 409, r.data


def test_a_providers_traits_may_name_one_trait_twice(api):
    host = api.create_provider("host")
    api.put("/traits/CUSTOM_FAST")
    r = api.put(
        f"/resource_providers/{host}/traits",
        {"traits": ["CUSTOM_FAST", "HW_CPU_X86_AVX", "CUSTOM_FAST"], "resource_provider_generation": 0},
    )
    assert r.status_code == 200, r.data
    assert sorted(r.json_body["traits"]) == ["CUSTOM_FAST", "HW_CPU_X86_AVX"]
    assert sorted(api.get(f"/resource_providers/{host}/traits").json_body["traits"]) == [
        "CUSTOM_FAST",
        "HW_CPU_X86_AVX",
    ]


def test_a_trait_name_no_trait_can_have_is_refused_by_name(api):
    host = api.create_provider("host")
    r = api.put(f"/resource_providers/{host}/traits", {"traits": ["!CUSTOM_FAST"], "resource_provider_generation": 0})
    assert r.status_code == 400, r.data
    assert _message(r) == "No such trait !CUSTOM_FAST"


# --- numbers: a whole number written as a float is an integer ------------------------------------------


def test_a_whole_number_written_as_a_float_counts_as_an_integer(api):
    host = api.create_provider("host")
    r = api.put(
        f"/resource_providers/{host}/inventories",
        {"resource_provider_generation": 0.0, "inventories": {"VCPU": {"total": 8.0, "reserved": 1.0}}},
    )
    assert r.status_code == 200, r.data
    inventory = api.get(f"/resource_providers/{host}/inventories/VCPU").json_body
    assert (inventory["total"], inventory["reserved"]) == (8, 1)
    assert isinstance(inventory["total"], int)

    consumer = new_uuid()
    r = api.put(
        f"/allocations/{consumer}",
        {
            "allocations": {host: {"resources": {"VCPU": 2.0}}},
            "project_id": "proj",
            "user_id": "user",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        },
    )
    assert r.status_code == 204, r.data
    assert api.get(f"/allocations/{consumer}").json_body["allocations"][host]["resources"] == {"VCPU": 2}


def test_a_float_with_a_fraction_is_still_not_an_integer(api):
    host = api.create_provider("host")
    r = api.put(
        f"/resource_providers/{host}/inventories",
        {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8.5}}},
    )
    assert r.status_code == 400, r.data
    assert "is not of type 'integer'" in error_detail(r)


@pytest.mark.parametrize(
    ("version", "fields", "status"),
    [
        # Placement refuses a capacity, int((total - reserved) x allocation_ratio), below 0 ...
        ("1.26", {"total": 8, "allocation_ratio": -1.0}, 400),
        ("1.25", {"total": 8, "allocation_ratio": -1.0}, 400),
        ("1.26", {"total": 8, "reserved": 9}, 400),
        # ... and before 1.26 one of 0, whatever makes it 0.
        ("1.25", {"total": 8, "allocation_ratio": 0.0}, 400),
        ("1.25", {"total": 8, "allocation_ratio": 0.00001}, 400),
        ("1.25", {"total": 8, "reserved": 8}, 400),
        ("1.26", {"total": 8, "allocation_ratio": 0.0}, 200),
        ("1.26", {"total": 8, "reserved": 8}, 200),
        ("1.25", {"total": 8, "allocation_ratio": 0.2}, 200),
    ],
)
def test_an_inventory_is_refused_for_its_capacity_as_placement_refuses_it(api, version, fields, status):
    host = api.create_provider("host")
    r = api.put(
        f"/resource_providers/{host}/inventories",
        {"resource_provider_generation": 0, "inventories": {"VCPU": fields}},
        version=version,
    )
    assert r.status_code == status, r.data
    if status == 400:
        assert "The reserved value is greater than" in error_detail(r)
        assert api.get(f"/resource_providers/{host}/inventories").json_body["inventories"] == {}
    # One class at a time, as POST /resource_providers/{uuid}/inventories adds it, the same.
    r = api.post(
        f"/resource_providers/{host}/inventories",
        {"resource_provider_generation": 1 if status == 200 else 0, "resource_class": "MEMORY_MB", **fields},
        version=version,
    )
    assert r.status_code == (201 if status == 200 else 400), r.data


# --- what a provider's allocations and inventories answer ----------------------------------------------


def test_a_providers_allocations_carry_each_consumers_generation_from_1_28(api):
    host = api.create_provider("host", inventory={"VCPU": 8})
    first, second = new_uuid(), new_uuid()
    api.allocate(first, {host: {"VCPU": 1}})
    api.allocate(second, {host: {"VCPU": 1}})
    api.allocate(second, {host: {"VCPU": 2}}, generation=1)

    allocations = api.get(f"/resource_providers/{host}/allocations", version="1.28").json_body["allocations"]
    assert allocations == {
        first: {"resources": {"VCPU": 1}, "consumer_generation": 1},
        second: {"resources": {"VCPU": 2}, "consumer_generation": 2},
    }
    allocations = api.get(f"/resource_providers/{host}/allocations", version="1.27").json_body["allocations"]
    assert allocations == {first: {"resources": {"VCPU": 1}}, second: {"resources": {"VCPU": 2}}}


def test_no_last_modified_for_a_provider_without_inventories(api):
    host = api.create_provider("host")
    r = api.get(f"/resource_providers/{host}/inventories", version="1.15")
    assert r.headers["cache-control"] == "no-cache"
    assert "last-modified" not in r.headers
    api.set_inventory(host, {"VCPU": 8})
    assert "last-modified" in api.get(f"/resource_providers/{host}/inventories", version="1.15").headers

    r = api.put(f"/resource_providers/{host}/inventories", {"resource_provider_generation": 1, "inventories": {}})
    assert r.status_code == 200, r.data
    assert r.headers["cache-control"] == "no-cache"
    assert "last-modified" not in r.headers


# --- Accept: the GETs Placement answers whatever is asked ------------------------------------------


@pytest.mark.parametrize("accept", ["text/html", "application/xml"])
def test_version_discovery_and_a_trait_answer_any_accept(api, accept):
    api.put("/traits/CUSTOM_FAST")
    r = api.get("/", headers={"Accept": accept})
    assert r.status_code == 200, r.data
    assert r.json_body["versions"][0]["max_version"] == "1.39"
    assert api.get("/traits/CUSTOM_FAST", headers={"Accept": accept}).status_code == 204
    # The other reads still refuse a client that takes no JSON.
    assert api.get("/traits", headers={"Accept": "application/xml"}).status_code == 406


# --- differences on purpose (docs/compatibility.md) ------------------------------------------------


def test_nul_characters_in_a_body_are_refused(api):
    r = api.post("/resource_providers", raw=b'{"name": "a\\u0000b"}')
    assert r.status_code == 400, r.data
    assert _message(r) == "Malformed JSON: NUL characters are not allowed in strings."


@pytest.mark.parametrize("body", [b"[" * 5000 + b"]" * 5000, b'{"name": "x\\ud800"}'])
def test_json_placement_fails_on_is_a_bad_request(api, body):
    r = api.post("/resource_providers", raw=body)
    assert r.status_code == 400, r.data
    assert _message(r).startswith("Malformed JSON: ")


def test_the_json_media_type_is_matched_whatever_its_case(api):
    r = api.post("/resource_providers", {"name": "host"}, content_type="Application/JSON")
    assert r.status_code == 200, r.data


def test_every_answer_to_a_version_read_varies_by_it(api):
    for r in (
        api.get(f"/resource_providers/{new_uuid()}"),  # a 404 Placement raises outside its handler
        api.get("/nothing"),
        api.post("/resource_providers", raw=b"{}", content_type=""),
    ):
        assert r.status_code in (400, 404), r.data
        assert r.headers["vary"] == "openstack-api-version"
        assert r.headers["OpenStack-API-Version"] == "placement 1.39"
