"""Error answers where a client could tell Berth from OpenStack Placement 16.0.0, found by sending the
same requests to both (Placement on SQLite, noauth2) and comparing: the 401 of its authentication
middleware (WebOb's own error), the form of an error when ``Accept`` ranks HTML and JSON alike, the
order of its checks (``Accept`` and ``Content-Type`` before the policy) and the reason a malformed
microversion is refused."""

from __future__ import annotations

import orjson
import pytest
from apihelpers import error_detail

UNAUTHORIZED = (
    "This server could not verify that you are authorized to access the document you requested. Either you "
    "supplied the wrong credentials (e.g., bad password), or your browser does not understand how to supply the "
    "credentials required."
)

# --- a request without a token --------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/resource_providers", "/no/such/path"])
def test_a_request_without_a_token_gets_webobs_own_error(api, path):
    r = api.get(path, token="")
    assert r.status_code == 401, r.data
    assert r.headers["Content-Type"] == "application/json"
    assert orjson.loads(r.data) == {
        "message": f"{UNAUTHORIZED}<br /><br />\n\n\n",
        "code": "401 Unauthorized",
        "title": "Unauthorized",
    }
    # Refused before the microversion is read, as Placement's middleware refuses it.
    assert "OpenStack-API-Version" not in r.headers
    assert r.headers["x-openstack-request-id"].startswith("req-")


def test_a_request_without_a_token_gets_webobs_page_or_text(api):
    r = api.get("/resource_providers", token="", headers={"Accept": "text/html"})
    assert r.status_code == 401
    assert r.headers["Content-Type"] == "text/html; charset=UTF-8"
    assert r.data.decode() == (
        "<html>\n <head>\n  <title>401 Unauthorized</title>\n </head>\n <body>\n  <h1>401 Unauthorized</h1>\n"
        f"  {UNAUTHORIZED}<br /><br />\n\n\n\n </body>\n</html>"
    )
    r = api.get("/resource_providers", token="", headers={"Accept": "text/plain"})
    assert r.headers["Content-Type"] == "text/plain; charset=UTF-8"
    assert r.data.decode() == f"401 Unauthorized\n\n{UNAUTHORIZED}\n\n   "


def test_berths_own_paths_keep_their_error_list_without_a_token(api):
    r = api.get("/berth/leases", token="")
    assert r.status_code == 401
    assert r.json_body["errors"][0]["code"] == "berth.undefined_code"
    assert "requires authentication" in error_detail(r)


# --- Accept ranking HTML and JSON alike ---------------------------------------------------------------


@pytest.mark.parametrize(
    "accept",
    [
        "application/xml, */*;q=0.1",
        # JSON first, but WebOb offers the page first, and a tie goes to its first offer.
        "application/json, text/html",
        # Of a tie, the more specific range does not win either.
        "*/*;q=0.5, application/json;q=0.5",
    ],
)
def test_a_tie_between_html_and_json_gives_an_error_as_a_page(api, accept):
    r = api.get("/no/such/path", headers={"Accept": accept})
    assert r.status_code == 404
    assert r.headers["Content-Type"] == "text/html; charset=UTF-8"
    assert r.data.decode().startswith("<html>\n <head>\n  <title>404 Not Found</title>")
    # A success is JSON all the same.
    r = api.get("/resource_providers", headers={"Accept": accept})
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/json"
    assert r.json_body == {"resource_providers": []}


def test_each_form_counts_at_the_quality_of_its_most_specific_range(api):
    # HTML at 0.5 (text/*), JSON at 1 (*/*): JSON, as from Placement.
    r = api.get("/no/such/path", headers={"Accept": "text/*;q=0.5, */*"})
    assert r.status_code == 404
    assert r.headers["Content-Type"] == "application/json"


# --- the order of the checks --------------------------------------------------------------------------


@pytest.mark.parametrize("token", ["", "user:project"])
def test_accept_is_checked_before_the_policy(api, token):
    # An empty token names a caller without a role, as in Placement's noauth2 (the helper would send none).
    r = api.get("/resource_providers/abc", headers={"X-Auth-Token": token, "Accept": "text/plain"}, version="")
    assert r.status_code == 406, r.data
    assert r.data.decode() == (
        "406 Not Acceptable\n\nThe resource could not be generated that was acceptable to your browser "
        "(content of type text/plain. \n\n Only application/json is provided"
    )


def test_the_media_type_of_a_body_is_checked_before_the_policy(api):
    r = api.post("/resource_providers", raw=b"x", content_type="text/plain", token="user:project")
    assert r.status_code == 415, r.data
    assert error_detail(r).endswith("The media type text/plain is not supported, use application/json")
    r = api.put(
        "/resource_classes/CUSTOM_GOLD", raw=b"x", content_type="text/plain", token="user:project", version="1.6"
    )
    assert r.status_code == 415, r.data


def test_a_route_that_takes_no_body_is_not_refused_for_its_media_type(api):
    # PUT /resource_classes/{name} lost its body at 1.7: the policy speaks, and the admin's PUT creates.
    r = api.put("/resource_classes/CUSTOM_GOLD", raw=b"x", content_type="text/plain", token="user:project")
    assert r.status_code == 403, r.data
    r = api.put("/resource_classes/CUSTOM_GOLD", raw=b"x", content_type="text/plain")
    assert r.status_code == 201, r.data


def test_a_providers_aggregates_check_the_media_types_before_the_microversion(api):
    # Placement's aggregates handlers check Accept and Content-Type outside their microversion check.
    r = api.get("/resource_providers/abc/aggregates", headers={"Accept": "text/plain"}, version="1.0")
    assert r.status_code == 406, r.data
    r = api.put("/resource_providers/abc/aggregates", raw=b"x", content_type="text/plain", version="1.0")
    assert r.status_code == 415, r.data
    # The other routes check the microversion first, as Placement's do.
    r = api.get("/allocation_candidates", headers={"Accept": "text/plain"}, version="1.0")
    assert r.status_code == 404, r.data
    r = api.post("/resource_classes", raw=b"x", content_type="text/plain", version="1.1")
    assert r.status_code == 404, r.data


# --- a malformed microversion -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "reason"),
    [
        ("1.x", "invalid literal for int() with base 10: 'x'"),
        ("x", "invalid literal for int() with base 10: 'x'"),
        ("a.b", "invalid literal for int() with base 10: 'a'"),
        ("1.2.3", "invalid literal for int() with base 10: '2.3'"),
        ("1.5 x", "invalid literal for int() with base 10: '5 x'"),
        ("1.", "invalid literal for int() with base 10: ''"),
        (".5", "invalid literal for int() with base 10: ''"),
        ("LATEST", "invalid literal for int() with base 10: 'LATEST'"),
        # No minor: microversion-parse's Version(major, minor) is short of an argument.
        ("1", "Version.__new__() missing 1 required positional argument: 'minor'"),
    ],
)
def test_a_malformed_microversion_says_why(api, requested, reason):
    r = api.get("/resource_providers", version=requested)
    assert r.status_code == 400, r.data
    assert error_detail(r) == (
        "The server could not comply with the request since it is either malformed or otherwise incorrect.\n\n "
        f"Invalid microversion: invalid version string: {requested}; {reason}  "
    )
