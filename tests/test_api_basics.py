"""Version discovery, microversion negotiation, authentication and the error format."""

import pytest
from apihelpers import error_code, error_detail
from werkzeug.test import EnvironBuilder


def test_root_needs_no_token_and_lists_versions(api):
    r = api.get("/", token="", version="")
    assert r.status_code == 200
    v = r.json_body["versions"][0]
    assert (v["min_version"], v["max_version"], v["id"], v["status"]) == ("1.0", "1.39", "v1.0", "CURRENT")
    assert r.headers["OpenStack-API-Version"] == "placement 1.0"
    assert r.headers["vary"] == "openstack-api-version"
    assert r.headers["x-openstack-request-id"].startswith("req-")


def test_latest_is_echoed_as_the_maximum(api):
    r = api.get("/", version="latest")
    assert r.headers["OpenStack-API-Version"] == "placement 1.39"


def test_unsupported_version_is_406_with_range(api):
    r = api.get("/", version="1.40")
    assert r.status_code == 406
    err = r.json_body["errors"][0]
    assert (err["max_version"], err["min_version"]) == ("1.39", "1.0")
    assert "Unacceptable version header: 1.40" in err["detail"]


def test_well_formed_but_out_of_range_version_is_406(api):
    r = api.get("/", version="0.9")
    assert r.status_code == 406 and r.json_body["errors"][0]["max_version"] == "1.39"


def test_malformed_version_is_400(api):
    r = api.get("/resource_providers", version="1.a")
    assert r.status_code == 400
    assert "invalid version string" in error_detail(r)


def test_missing_token_is_401_except_root(api):
    r = api.get("/resource_providers", token="")
    assert r.status_code == 401
    # WebOb's own error, as Placement's authentication middleware answers it.
    assert r.json_body["title"] == "Unauthorized"


def test_non_admin_is_forbidden_by_legacy_policy(api):
    r = api.get("/resource_providers", token="alice:proj")
    assert r.status_code == 403
    assert error_detail(r).endswith("Policy does not allow placement:resource_providers:list to be performed.  ")
    r = api.get("/resource_providers", token="alice:proj", headers={"X-Roles": "admin"})
    assert r.status_code == 200


def test_unknown_path_404_and_wrong_method_405_with_allow(api):
    assert api.get("/nothing_here").status_code == 404
    r = api.request("PATCH", "/resource_providers")
    assert r.status_code == 405
    assert set(r.headers["Allow"].split(", ")) == {"GET", "POST"}


def test_error_code_appears_from_1_23(api):
    r = api.get("/resource_providers/nope", version="1.22")
    assert r.status_code == 404 and "code" not in r.json_body["errors"][0]
    r = api.get("/resource_providers/nope", version="1.23")
    assert error_code(r) == "placement.undefined_code"


@pytest.mark.parametrize("version", ["", "1.0", "1.22", "latest"])
def test_berths_own_paths_answer_a_berth_code_at_every_version(api, version):
    # Berth's own API has no microversions of its own: every error of it carries a code, and never
    # Placement's catch-all.
    missing = "00000000-0000-4000-8000-000000000000"
    r = api.get(f"/berth/leases/{missing}", version=version)
    assert r.status_code == 404 and error_code(r) == "berth.undefined_code", r.data
    r = api.put("/berth/quotas/p1", {"limits": {"VCPU": "4"}}, version=version)
    assert r.status_code == 400 and error_code(r) == "berth.undefined_code", r.data
    r = api.post("/berth/pick", {"query": {"resources": "VCPU:1"}, "consumers": []}, version=version)
    assert r.status_code == 400 and error_code(r) == "berth.pick.gang_bad_request", r.data
    r = api.request("PATCH", "/berth/leases", version=version)
    assert r.status_code == 405 and error_code(r) == "berth.undefined_code", r.data
    r = api.get(f"/berth/leases/{missing}", version=version, token="user:proj")
    assert r.status_code == 403 and error_code(r) == "berth.undefined_code", r.data
    # Placement's own paths are as Placement answers them.
    r = api.get("/resource_providers/nope", version=version)
    assert "code" not in r.json_body["errors"][0] or error_code(r) == "placement.undefined_code"


def test_route_newer_than_requested_version_is_404(api):
    assert api.get("/traits", version="1.5").status_code == 404
    assert api.get("/traits", version="1.6").status_code == 200


def test_wrong_content_type_is_415(api):
    r = api.post("/resource_providers", raw=b'{"name": "x"}', content_type="text/plain")
    assert r.status_code == 415
    assert "The media type text/plain is not supported, use application/json" in error_detail(r)


def test_malformed_json_is_400(api):
    r = api.post("/resource_providers", raw=b'{"name": ')
    assert r.status_code == 400
    assert "Malformed JSON" in error_detail(r)


def test_schema_violation_is_400(api):
    r = api.post("/resource_providers", {"nome": "x"})
    assert r.status_code == 400
    assert "JSON does not validate" in error_detail(r)


def test_accept_must_allow_json(api):
    r = api.get("/resource_providers", headers={"Accept": "text/html"})
    assert r.status_code == 406


@pytest.mark.parametrize(
    ("accept", "status"),
    [
        ("application/json", 200),
        (" application/json ", 200),
        ("*/*", 200),
        ("", 200),
        ("text/html, application/json;q=0.1", 200),
        ("application/*", 200),
        ("text/html;q=0.9, image/png", 406),
        # A quality of 0 refuses what it names, as the reference reads it.
        ("application/json;q=0", 406),
        ("*/*;q=0", 406),
        ("application/json;q=0, */*", 406),
        ("text/html;q=0, */*;q=0.5", 200),
    ],
)
def test_accept_headers_as_clients_send_them(api, accept, status):
    assert api.get("/resource_providers", headers={"Accept": accept}).status_code == status
    assert api.get("/resource_providers", headers={"Accept": "*/*"}).status_code == 200


def test_last_modified_and_cache_control_from_1_15(api):
    r = api.get("/resource_providers", version="1.14")
    assert "last-modified" not in r.headers
    r = api.get("/resource_providers", version="1.15")
    assert r.headers["cache-control"] == "no-cache"
    assert r.headers["last-modified"].endswith("GMT")


def test_huge_integer_and_deep_json_are_clean_400s(api):
    r = api.post("/resource_providers", raw=b'{"name": "x", "uuid": ' + b"9" * 400 + b"}")
    assert r.status_code == 400
    r = api.post("/resource_providers", raw=b"[" * 5000 + b"]" * 5000)
    assert r.status_code == 400


def test_body_shorter_than_its_content_length_is_400(api):
    body = b'{"name": "short"}'
    environ = EnvironBuilder(
        path="/resource_providers",
        method="POST",
        data=body,
        headers={
            "X-Auth-Token": "admin",
            "OpenStack-API-Version": "placement latest",
            "Content-Type": "application/json",
        },
    ).get_environ()
    environ["CONTENT_LENGTH"] = str(len(body) + 10)
    sent = {}
    answer = b"".join(api.client.application(environ, lambda status, headers: sent.update(status=status)))
    assert sent["status"].startswith("400") and b"not the 27 of its Content-Length" in answer
    assert api.get("/resource_providers?name=short").json_body["resource_providers"] == []
