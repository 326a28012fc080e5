"""/resource_classes and /resource_classes/{name}, per the Placement API reference
(api-ref/source/resource_class.inc, parameters.yaml, errors.inc).

The reference's resource_classes.inc (list and create) is not in the local index; those cases follow
the reference's published behaviour: 200 list of {name, links}, POST 201 + Location, 409 on duplicates.
"""

import threading

import pytest
from apihelpers import error_code, error_detail

STANDARD = ["VCPU", "MEMORY_MB", "DISK_GB"]


def _names(response):
    return [rc["name"] for rc in response.json_body["resource_classes"]]


def _self_link(name):
    return [{"rel": "self", "href": f"/resource_classes/{name}"}]


def _create(api, name):
    r = api.post("/resource_classes", {"name": name})
    assert r.status_code == 201, r.data
    return r


# --- list ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1.2", "latest"])
def test_fresh_database_lists_standard_classes_only(api, version):
    r = api.get("/resource_classes", version=version)
    assert r.status_code == 200
    assert r.mimetype == "application/json"
    names = _names(r)
    for name in STANDARD:
        assert name in names
    assert not [n for n in names if n.startswith("CUSTOM_")]
    assert len(names) == len(set(names))


def test_list_entries_are_name_and_self_link(api):
    r = api.get("/resource_classes")
    for rc in r.json_body["resource_classes"]:
        assert rc == {"name": rc["name"], "links": _self_link(rc["name"])}


def test_list_includes_custom_classes_once_created(api):
    before = _names(api.get("/resource_classes"))
    _create(api, "CUSTOM_GOLD")
    _create(api, "CUSTOM_SILVER")
    after = _names(api.get("/resource_classes"))
    assert set(after) - set(before) == {"CUSTOM_GOLD", "CUSTOM_SILVER"}
    assert len(after) == len(before) + 2


# --- create ----------------------------------------------------------------------------------


def test_create_custom_class_is_201_with_location_and_no_body(api):
    r = api.post("/resource_classes", {"name": "CUSTOM_FPGA"})
    assert r.status_code == 201
    assert r.headers["Location"].endswith("/resource_classes/CUSTOM_FPGA")
    assert r.data == b""
    shown = api.get("/resource_classes/CUSTOM_FPGA")
    assert shown.status_code == 200
    assert shown.json_body == {"name": "CUSTOM_FPGA", "links": _self_link("CUSTOM_FPGA")}


@pytest.mark.parametrize("version", ["1.2", "1.22"])
def test_duplicate_create_is_409_without_code_before_1_23(api, version):
    _create(api, "CUSTOM_DUP")
    r = api.post("/resource_classes", {"name": "CUSTOM_DUP"}, version=version)
    assert r.status_code == 409
    assert r.json_body["errors"][0]["title"] == "Conflict"
    assert "code" not in r.json_body["errors"][0]
    assert "CUSTOM_DUP" in error_detail(r)


@pytest.mark.parametrize("version", ["1.23", "latest"])
def test_duplicate_create_is_409_duplicate_name_from_1_23(api, version):
    # errors.inc: placement.duplicate_name - a resource of this type already exists with the same name.
    _create(api, "CUSTOM_DUP")
    r = api.post("/resource_classes", {"name": "CUSTOM_DUP"}, version=version)
    assert r.status_code == 409
    assert error_code(r) == "placement.duplicate_name"
    assert _names(api.get("/resource_classes")).count("CUSTOM_DUP") == 1


@pytest.mark.parametrize(
    "body",
    [
        {"name": "VCPU"},  # standard name, not CUSTOM_
        {"name": "IRON_NFV"},  # no CUSTOM_ prefix
        {"name": "CUSTOM_lower"},  # lower case
        {"name": "CUSTOM_Illegal&@!Name?"},  # illegal characters
        {"name": "CUSTOM_"},  # nothing after the prefix
        {"name": "CUSTOM_" + "A" * 249},  # 256 characters
        {"name": ""},
        {"name": 5},
        {},
        {"name": "CUSTOM_OK", "additional": "x"},
    ],
)
def test_create_with_invalid_body_is_400(api, body):
    before = _names(api.get("/resource_classes"))
    r = api.post("/resource_classes", body)
    assert r.status_code == 400
    assert r.json_body["errors"][0]["title"] == "Bad Request"
    assert _names(api.get("/resource_classes")) == before


def test_create_name_of_255_characters_is_accepted(api):
    name = "CUSTOM_" + "A" * 248
    assert len(name) == 255
    _create(api, name)
    assert api.get(f"/resource_classes/{name}").status_code == 200


def test_create_with_wrong_content_type_is_415(api):
    r = api.post("/resource_classes", raw=b'{"name": "CUSTOM_X"}', content_type="text/plain")
    assert r.status_code == 415


def test_create_with_malformed_json_is_400(api):
    r = api.post("/resource_classes", raw=b'{"name": ')
    assert r.status_code == 400


# --- show ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", STANDARD)
def test_show_standard_class(api, name):
    r = api.get(f"/resource_classes/{name}")
    assert r.status_code == 200
    assert r.json_body == {"name": name, "links": _self_link(name)}


def test_show_missing_class_is_404(api):
    r = api.get("/resource_classes/CUSTOM_NOT_THERE")
    assert r.status_code == 404
    assert r.json_body["errors"][0]["title"] == "Not Found"


# --- update, microversions 1.2 - 1.6: rename ---------------------------------------------------


@pytest.mark.parametrize("version", ["1.2", "1.6"])
def test_put_before_1_7_renames_custom_class(api, version):
    _create(api, "CUSTOM_OLD")
    r = api.put("/resource_classes/CUSTOM_OLD", {"name": "CUSTOM_NEW"}, version=version)
    assert r.status_code == 200
    assert r.json_body == {"name": "CUSTOM_NEW", "links": _self_link("CUSTOM_NEW")}
    assert api.get("/resource_classes/CUSTOM_OLD").status_code == 404
    assert api.get("/resource_classes/CUSTOM_NEW").status_code == 200
    names = _names(api.get("/resource_classes"))
    assert "CUSTOM_NEW" in names and "CUSTOM_OLD" not in names


def test_put_before_1_7_missing_class_is_404(api):
    r = api.put("/resource_classes/CUSTOM_MISSING", {"name": "CUSTOM_OTHER"}, version="1.6")
    assert r.status_code == 404
    assert api.get("/resource_classes/CUSTOM_OTHER").status_code == 404


def test_put_before_1_7_to_existing_name_is_409(api):
    _create(api, "CUSTOM_A")
    _create(api, "CUSTOM_B")
    r = api.put("/resource_classes/CUSTOM_A", {"name": "CUSTOM_B"}, version="1.6")
    assert r.status_code == 409
    assert api.get("/resource_classes/CUSTOM_A").status_code == 200


def test_put_before_1_7_standard_class_is_400(api):
    r = api.put("/resource_classes/VCPU", {"name": "CUSTOM_VCPU"}, version="1.6")
    assert r.status_code == 400
    assert api.get("/resource_classes/VCPU").status_code == 200
    assert api.get("/resource_classes/CUSTOM_VCPU").status_code == 404


@pytest.mark.parametrize(
    "body",
    [{"name": "VCPU"}, {"name": "NOT_CUSTOM"}, {"name": "CUSTOM_lower"}, {"name": "CUSTOM_X", "additional": 1}, {}],
)
def test_put_before_1_7_invalid_new_name_is_400(api, body):
    _create(api, "CUSTOM_A")
    r = api.put("/resource_classes/CUSTOM_A", body, version="1.6")
    assert r.status_code == 400
    assert api.get("/resource_classes/CUSTOM_A").status_code == 200


# --- update, microversion 1.7 onwards: create or confirm ----------------------------------------


@pytest.mark.parametrize("version", ["1.7", "latest"])
def test_put_from_1_7_creates_then_confirms(api, version):
    r = api.put("/resource_classes/CUSTOM_ENSURED", version=version)
    assert r.status_code == 201
    assert r.headers["Location"].endswith("/resource_classes/CUSTOM_ENSURED")
    assert r.data == b""
    assert api.get("/resource_classes/CUSTOM_ENSURED").status_code == 200
    r = api.put("/resource_classes/CUSTOM_ENSURED", version=version)
    assert r.status_code == 204
    assert r.data == b""
    assert _names(api.get("/resource_classes")).count("CUSTOM_ENSURED") == 1


def test_put_from_1_7_of_class_created_by_post_is_204(api):
    _create(api, "CUSTOM_POSTED")
    assert api.put("/resource_classes/CUSTOM_POSTED", version="1.7").status_code == 204


def test_put_from_1_7_existing_class_still_returns_location(api):
    # resource_class.inc "Update resource class": the response carries the Location header
    # (parameters.yaml `location`, required) for both 201 and 204.
    api.put("/resource_classes/CUSTOM_LOC")
    r = api.put("/resource_classes/CUSTOM_LOC")
    assert r.status_code == 204
    assert r.headers.get("Location", "").endswith("/resource_classes/CUSTOM_LOC")


@pytest.mark.parametrize("name", ["VCPU", "NOT_CUSTOM", "CUSTOM_lower", "CUSTOM_", "CUSTOM_" + "A" * 249])
def test_put_from_1_7_non_custom_or_invalid_name_is_400(api, name):
    # parameters.yaml resource_class_path_custom: the name must start with CUSTOM_, else 400.
    before = _names(api.get("/resource_classes"))
    r = api.put(f"/resource_classes/{name}", version="1.7")
    assert r.status_code == 400
    assert _names(api.get("/resource_classes")) == before


# --- delete ----------------------------------------------------------------------------------


def test_delete_custom_class(api):
    _create(api, "CUSTOM_GONE")
    r = api.delete("/resource_classes/CUSTOM_GONE")
    assert r.status_code == 204
    assert r.data == b""
    assert api.get("/resource_classes/CUSTOM_GONE").status_code == 404
    assert "CUSTOM_GONE" not in _names(api.get("/resource_classes"))
    assert api.delete("/resource_classes/CUSTOM_GONE").status_code == 404


def test_deleted_class_can_be_created_again(api):
    _create(api, "CUSTOM_AGAIN")
    assert api.delete("/resource_classes/CUSTOM_AGAIN").status_code == 204
    _create(api, "CUSTOM_AGAIN")


@pytest.mark.parametrize("name", STANDARD)
def test_delete_standard_class_is_400(api, name):
    r = api.delete(f"/resource_classes/{name}")
    assert r.status_code == 400
    assert api.get(f"/resource_classes/{name}").status_code == 200


def test_delete_missing_class_is_404(api):
    r = api.delete("/resource_classes/CUSTOM_NEVER_WAS")
    assert r.status_code == 404


def test_delete_class_with_inventory_is_409_until_inventory_removed(api):
    _create(api, "CUSTOM_USED")
    rp = api.create_provider(inventory={"CUSTOM_USED": 4})
    r = api.delete("/resource_classes/CUSTOM_USED")
    assert r.status_code == 409
    assert api.get("/resource_classes/CUSTOM_USED").status_code == 200
    api.set_inventory(rp, {"VCPU": 2})
    assert api.delete("/resource_classes/CUSTOM_USED").status_code == 204


# --- microversion boundaries -----------------------------------------------------------------


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("GET", "/resource_classes", None),
        ("POST", "/resource_classes", {"name": "CUSTOM_EARLY"}),
        ("GET", "/resource_classes/VCPU", None),
        ("PUT", "/resource_classes/CUSTOM_EARLY", {"name": "CUSTOM_LATE"}),
        ("DELETE", "/resource_classes/CUSTOM_EARLY", None),
    ],
)
def test_routes_are_404_at_1_1(api, method, path, body):
    # resource_class.inc: resource class API calls are available starting from version 1.2.
    _create(api, "CUSTOM_EARLY")
    r = api.request(method, path, body, version="1.1")
    assert r.status_code == 404
    assert api.get("/resource_classes/CUSTOM_EARLY").status_code == 200
    assert api.get("/resource_classes/CUSTOM_LATE").status_code == 404


def test_microversion_404_comes_before_415(api):
    r = api.post("/resource_classes", raw=b"data", content_type="text/plain", version="1.1")
    assert r.status_code == 404


def test_custom_class_usable_in_inventory_after_put_create(api):
    assert api.put("/resource_classes/CUSTOM_MAGIC").status_code == 201
    rp = api.create_provider(inventory={"CUSTOM_MAGIC": 3})
    r = api.get(f"/resource_providers/{rp}/inventories")
    assert r.json_body["inventories"]["CUSTOM_MAGIC"]["total"] == 3


@pytest.mark.parametrize("path", ["/resource_classes/CUSTOM_RACED", "/traits/CUSTOM_RACED"])
def test_concurrent_puts_of_one_new_name_create_it_once_and_never_fail(app, path):
    """Many hosts registering at once write the same new class or trait: one 201, the rest 204, no
    500 from the unique key (each PUT is one insert that does nothing when the name exists)."""
    from concurrent.futures import ThreadPoolExecutor

    from apihelpers import Api

    barrier = threading.Barrier(8)

    def put(_):
        api = Api(app)
        barrier.wait()
        return api.put(path).status_code

    with ThreadPoolExecutor(8) as pool:
        statuses = sorted(pool.map(put, range(8)))
    assert statuses == [201] + [204] * 7
