"""Error answers where a client could tell Berth from OpenStack Placement 16.0.0, found by sending the
same requests to both (Placement on SQLite, noauth2) and comparing: WebOb's stock texts of a 404,
405, 406 and 415, the page or plain text for a client that takes no JSON, an inventory keyed by a
name that is no class's, and the 409 of an allocation on a provider that holds none of the classes
asked."""

from __future__ import annotations

import orjson
import pytest
from apihelpers import error_detail, new_uuid
from werkzeug.test import Client

from berth.web.access.auth import noauth_caller
from berth.web.access.policy import PolicyEnforcer
from berth.web.app import JsonApp, WebCall, WebRoute
from berth.web.responses import Reply, json_reply

# --- WebOb's stock texts, as Placement answers them -------------------------------------------------


@pytest.mark.parametrize(
    ("path", "version"),
    [
        ("/no/such/path", "latest"),
        # A final slash on one of Placement's paths.
        ("/resource_providers/", "latest"),
        # A route the microversion predates (GET /traits came with 1.6).
        ("/traits", "1.1"),
    ],
)
def test_a_path_no_route_serves_says_the_stock_sentence_once(api, path, version):
    r = api.get(path, version=version)
    assert r.status_code == 404, r.data
    error = r.json_body["errors"][0]
    assert (error["title"], error["detail"]) == ("Not Found", "The resource could not be found.\n\n   ")


def test_a_method_a_path_does_not_serve_is_named_with_webobs_spacing(api):
    r = api.request("PATCH", "/traits")
    assert r.status_code == 405, r.data
    error = r.json_body["errors"][0]
    assert error["title"] == "Method Not Allowed"
    assert error["detail"] == (
        "The method PATCH is not allowed for this resource. \n\n The method specified is not allowed for this resource."
    )


@pytest.mark.parametrize(
    ("accept", "named"),
    [
        # Placement's request log middleware takes a missing or "*/*" Accept for JSON.
        (None, "application/json"),
        ("*/*", "application/json"),
        ("application/json;q=0.5", "application/json;q=0.5"),
    ],
)
def test_an_unknown_microversion_names_the_accept_header(api, accept, named):
    r = api.get("/resource_providers", version="9.9", headers={"Accept": accept} if accept else None)
    assert r.status_code == 406, r.data
    error = r.json_body["errors"][0]
    assert error["title"] == "Not Acceptable"
    assert error["detail"] == (
        f"The resource could not be generated that was acceptable to your browser (content of type {named}. "
        "\n\n Invalid microversion: Unacceptable version header: 9.9"
    )


@pytest.mark.parametrize(
    ("content_type", "media_type", "named"),
    [
        ("text/plain", "text/plain", "text/plain"),
        ("text/plain; charset=utf-8", "text/plain; charset=utf-8", "text/plain"),
        # A body without a type: Placement names it "None" in both sentences.
        (None, "None", "None"),
    ],
)
def test_an_unsupported_media_type_is_named_in_the_stock_sentence(api, content_type, media_type, named):
    if content_type is None:
        r = api.post("/resource_providers", raw=b"", content_type=None)
    else:
        r = api.post("/resource_providers", raw=b"x", content_type=content_type)
    assert r.status_code == 415, r.data
    error = r.json_body["errors"][0]
    assert error["title"] == "Unsupported Media Type"
    assert error["detail"] == (
        f"The request media type {media_type} is not supported by this server. "
        f"\n\n The media type {named} is not supported, use application/json"
    )


# --- a client that takes no JSON ---------------------------------------------------------------------


@pytest.mark.parametrize("accept", ["text/plain", "application/json;q=0"])
def test_a_client_that_takes_neither_json_nor_html_gets_plain_text(api, accept):
    r = api.get("/resource_providers", headers={"Accept": accept})
    assert r.status_code == 406
    assert r.headers["Content-Type"] == "text/plain; charset=UTF-8"
    assert r.data.decode() == (
        "406 Not Acceptable\n\nThe resource could not be generated that was acceptable to your browser "
        f"(content of type {accept}. \n\n Only application/json is provided"
    )
    r = api.get("/no/such/path", headers={"Accept": accept})
    assert r.status_code == 404
    assert r.data.decode() == "404 Not Found\n\nThe resource could not be found.\n\n   "
    r = api.post("/resource_providers", {"nome": "x"}, headers={"Accept": accept})
    assert r.status_code == 400
    assert r.data.decode().startswith(
        "400 Bad Request\n\nThe server could not comply with the request since it is either malformed or otherwise "
        "incorrect.\n\n JSON does not validate: "
    )


def test_a_browser_gets_webobs_page(api):
    html = {"Accept": "text/html"}
    r = api.get("/no/such/path", headers=html)
    assert r.status_code == 404
    assert r.headers["Content-Type"] == "text/html; charset=UTF-8"
    assert r.data.decode() == (
        "<html>\n <head>\n  <title>404 Not Found</title>\n </head>\n <body>\n  <h1>404 Not Found</h1>\n"
        "  The resource could not be found.<br /><br />\n\n\n\n </body>\n</html>"
    )
    r = api.request("PATCH", "/traits", headers=html)
    assert r.data.decode() == (
        "<html>\n <head>\n  <title>405 Method Not Allowed</title>\n </head>\n <body>\n"
        "  <h1>405 Method Not Allowed</h1>\n  The method PATCH is not allowed for this resource. <br /><br />\n"
        "The method specified is not allowed for this resource.\n </body>\n</html>"
    )


# --- the other services' JSON errors share the stock texts -------------------------------------------


def _thing(call: WebCall) -> Reply:
    return json_reply(call.json_body())


def test_the_conductors_api_says_the_stock_texts_once_too():
    app = JsonApp(
        {"/things": {"PUT": WebRoute(_thing, None)}},
        authenticate=noauth_caller,
        policy=PolicyEnforcer([]),
        metrics="off",
        service="test",
    )
    client = Client(app)
    admin = {"X-Auth-Token": "admin"}

    def detail(response):
        return orjson.loads(response.data)["errors"][0]["detail"]

    assert detail(client.get("/nowhere", headers=admin)) == "The resource could not be found.\n\n   "
    assert detail(client.delete("/things", headers=admin)) == (
        "The method DELETE is not allowed for this resource. "
        "\n\n The method specified is not allowed for this resource."
    )
    assert detail(client.put("/things", headers={**admin, "Content-Type": "text/plain"}, data=b"x")) == (
        "The request media type text/plain is not supported by this server. "
        "\n\n The media type text/plain is not supported, use application/json"
    )


# --- PUT /resource_providers/{uuid}/inventories with a key that is no class's name -----------------------


def test_an_inventory_keyed_by_no_class_name_is_an_unknown_class(api):
    rp = api.create_provider()
    r = api.put(
        f"/resource_providers/{rp}/inventories",
        {"resource_provider_generation": 0, "inventories": {"vcpu": {"total": 4}}},
    )
    assert r.status_code == 400, r.data
    assert error_detail(r) == (
        "The server could not comply with the request since it is either malformed or otherwise incorrect.\n\n "
        f"Unknown resource class in inventory for resource provider {rp}: No such resource class vcpu.  "
    )


@pytest.mark.parametrize("record", [5, None, {}, {"total": "x"}, {"total": 1, "colour": "red"}])
def test_a_record_under_such_a_key_is_still_checked(api, record):
    # Placement answers these with a 500 (it builds the inventory before it looks the class up).
    rp = api.create_provider()
    r = api.put(
        f"/resource_providers/{rp}/inventories", {"resource_provider_generation": 0, "inventories": {"vcpu": record}}
    )
    assert r.status_code == 400, r.data
    assert "JSON does not validate" in error_detail(r)


# --- a provider that holds none of the classes of an allocation --------------------------------------


def _body(allocations):
    return {
        "allocations": {rp: {"resources": resources} for rp, resources in allocations.items()},
        "project_id": "proj",
        "user_id": "user",
        "consumer_generation": None,
        "consumer_type": "INSTANCE",
    }


def _invalid(classes, providers):
    return (
        "There was a conflict when trying to complete your request.\n\n Unable to allocate inventory: "
        f"Inventory for '{classes}' on resource provider '{providers}' invalid.  "
    )


def test_a_provider_without_any_class_asked_is_named_with_every_class_of_the_write(api):
    rp = api.create_provider(inventory={"MEMORY_MB": 1024})
    for resources in ({"VCPU": 1, "DISK_GB": 10}, {"DISK_GB": 10, "VCPU": 1}):
        r = api.put(f"/allocations/{new_uuid()}", _body({rp: resources}))
        assert r.status_code == 409, r.data
        # Placement names the classes in the order of its ids, whatever the body's order.
        assert error_detail(r) == _invalid("VCPU, DISK_GB", rp)
    r = api.post("/allocations", {new_uuid(): _body({rp: {"VCPU": 1, "DISK_GB": 10}})})
    assert r.status_code == 409, r.data
    assert error_detail(r) == _invalid("VCPU, DISK_GB", rp)
    # The order of a Python set of Placement's ids: not always ascending.
    r = api.put(f"/allocations/{new_uuid()}", _body({rp: {"NUMA_CORE": 1, "VGPU": 1, "VCPU": 2}}))
    assert error_detail(r) == _invalid("VCPU, VGPU, NUMA_CORE", rp)


def test_every_provider_without_any_class_of_the_write_is_named(api):
    memory = api.create_provider(inventory={"MEMORY_MB": 1024})
    empty = api.create_provider()
    r = api.put(f"/allocations/{new_uuid()}", _body({memory: {"VCPU": 1}, empty: {"DISK_GB": 1}}))
    assert r.status_code == 409, r.data
    # Placement joins a set of the providers' uuids, in an order that changes from one run to the next.
    assert error_detail(r) in (
        _invalid("VCPU, DISK_GB", f"{memory}, {empty}"),
        _invalid("VCPU, DISK_GB", f"{empty}, {memory}"),
    )


def test_a_provider_holding_another_class_of_the_write_is_named_with_the_one_it_lacks(api):
    # Not empty of the write's classes: it holds DISK_GB, asked of another provider.
    disk = api.create_provider(inventory={"DISK_GB": 100})
    other = api.create_provider(inventory={"DISK_GB": 100})
    r = api.put(f"/allocations/{new_uuid()}", _body({disk: {"VCPU": 1}, other: {"DISK_GB": 1}}))
    assert r.status_code == 409, r.data
    assert error_detail(r) == _invalid("VCPU", disk)
