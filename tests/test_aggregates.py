"""/resource_providers/{uuid}/aggregates, per the Placement API reference
(api-ref/source/aggregates.inc, parameters.yaml, generations.inc, errors.inc)."""

import pytest
from apihelpers import error_code, new_uuid

OLD_VERSIONS = ["1.1", "1.18"]
NEW_VERSIONS = ["1.19", "latest"]


def _path(rp):
    return f"/resource_providers/{rp}/aggregates"


def _generation(api, rp):
    return api.get(f"/resource_providers/{rp}").json_body["generation"]


def _aggregates(api, rp):
    r = api.get(_path(rp))
    assert r.status_code == 200, r.data
    return sorted(r.json_body["aggregates"])


# --- microversions 1.1 - 1.18 ----------------------------------------------------------------


@pytest.mark.parametrize("version", OLD_VERSIONS)
def test_get_before_1_19_has_no_generation(api, version):
    rp = api.create_provider()
    r = api.get(_path(rp), version=version)
    assert r.status_code == 200
    assert r.json_body == {"aggregates": []}


@pytest.mark.parametrize("version", OLD_VERSIONS)
def test_put_before_1_19_takes_a_bare_list(api, version):
    rp = api.create_provider()
    aggs = sorted([new_uuid(), new_uuid()])
    r = api.put(_path(rp), aggs, version=version)
    assert r.status_code == 200
    assert set(r.json_body) == {"aggregates"}
    assert sorted(r.json_body["aggregates"]) == aggs
    r = api.get(_path(rp), version=version)
    assert set(r.json_body) == {"aggregates"}
    assert sorted(r.json_body["aggregates"]) == aggs


def test_put_before_1_19_replaces_and_clears(api):
    rp = api.create_provider()
    a, b, c = new_uuid(), new_uuid(), new_uuid()
    api.put(_path(rp), [a, b], version="1.1")
    r = api.put(_path(rp), [b, c], version="1.1")
    assert sorted(r.json_body["aggregates"]) == sorted([b, c])
    assert _aggregates(api, rp) == sorted([b, c])
    r = api.put(_path(rp), [], version="1.1")
    assert r.status_code == 200
    assert r.json_body == {"aggregates": []}
    assert _aggregates(api, rp) == []


def test_put_before_1_19_rejects_the_1_19_object_body(api):
    rp = api.create_provider()
    r = api.put(_path(rp), {"aggregates": [new_uuid()], "resource_provider_generation": 0}, version="1.18")
    assert r.status_code == 400
    assert _aggregates(api, rp) == []


# --- microversion 1.19 onwards ---------------------------------------------------------------


@pytest.mark.parametrize("version", NEW_VERSIONS)
def test_get_from_1_19_includes_generation(api, version):
    rp = api.create_provider()
    r = api.get(_path(rp), version=version)
    assert r.status_code == 200
    assert r.json_body == {"aggregates": [], "resource_provider_generation": _generation(api, rp)}


@pytest.mark.parametrize("version", NEW_VERSIONS)
def test_put_from_1_19_sets_aggregates_and_bumps_generation(api, version):
    rp = api.create_provider()
    gen = _generation(api, rp)
    aggs = sorted([new_uuid(), new_uuid()])
    r = api.put(_path(rp), {"aggregates": aggs, "resource_provider_generation": gen}, version=version)
    assert r.status_code == 200
    assert sorted(r.json_body["aggregates"]) == aggs
    new_gen = r.json_body["resource_provider_generation"]
    assert new_gen == gen + 1
    assert _generation(api, rp) == new_gen
    r = api.get(_path(rp), version=version)
    assert sorted(r.json_body["aggregates"]) == aggs
    assert r.json_body["resource_provider_generation"] == new_gen


def test_put_from_1_19_replaces_and_clears(api):
    rp = api.create_provider()
    a, b, c = new_uuid(), new_uuid(), new_uuid()
    gen = api.put(_path(rp), {"aggregates": [a, b], "resource_provider_generation": _generation(api, rp)}).json_body[
        "resource_provider_generation"
    ]
    r = api.put(_path(rp), {"aggregates": [c], "resource_provider_generation": gen})
    assert r.status_code == 200
    assert r.json_body["aggregates"] == [c]
    gen = r.json_body["resource_provider_generation"]
    r = api.put(_path(rp), {"aggregates": [], "resource_provider_generation": gen})
    assert r.status_code == 200
    assert r.json_body == {"aggregates": [], "resource_provider_generation": gen + 1}
    assert _aggregates(api, rp) == []


def test_aggregate_shared_by_providers(api):
    # parameters.yaml aggregates: previously nonexistent aggregates are created automatically.
    agg = new_uuid()
    rp1 = api.create_provider(aggregates=[agg])
    rp2 = api.create_provider(aggregates=[agg, new_uuid()])
    assert _aggregates(api, rp1) == [agg]
    assert agg in _aggregates(api, rp2)
    gen = _generation(api, rp2)
    api.put(_path(rp2), {"aggregates": [], "resource_provider_generation": gen})
    assert _aggregates(api, rp1) == [agg]


@pytest.mark.parametrize("version", ["1.23", "latest"])
def test_put_with_stale_generation_is_409_concurrent_update(api, version):
    agg = new_uuid()
    rp = api.create_provider(aggregates=[agg])
    gen = _generation(api, rp)
    r = api.put(_path(rp), {"aggregates": [new_uuid()], "resource_provider_generation": gen - 1}, version=version)
    assert r.status_code == 409
    assert error_code(r) == "placement.concurrent_update"
    assert _aggregates(api, rp) == [agg]
    assert _generation(api, rp) == gen


def test_put_with_stale_generation_at_1_19_has_no_code(api):
    rp = api.create_provider()
    r = api.put(_path(rp), {"aggregates": [], "resource_provider_generation": 42}, version="1.19")
    assert r.status_code == 409
    assert "code" not in r.json_body["errors"][0]


@pytest.mark.parametrize(
    "body",
    [
        [],  # the pre-1.19 bare list
        {"aggregates": []},  # no generation
        {"resource_provider_generation": 0},  # no aggregates
        {"aggregates": [], "resource_provider_generation": 0, "extra": 1},
    ],
)
def test_put_from_1_19_needs_the_object_body(api, body):
    rp = api.create_provider()
    r = api.put(_path(rp), body, version="1.19")
    assert r.status_code == 400
    assert _generation(api, rp) == 0


# --- invalid input, missing provider, microversion 1.0 -----------------------------------------


@pytest.mark.parametrize("bad", ["not-a-uuid", "", "12345", 42])
@pytest.mark.parametrize("version", ["1.1", "latest"])
def test_put_with_invalid_uuid_is_400(api, version, bad):
    rp = api.create_provider()
    aggs = [new_uuid(), bad]
    body = aggs if version == "1.1" else {"aggregates": aggs, "resource_provider_generation": _generation(api, rp)}
    r = api.put(_path(rp), body, version=version)
    assert r.status_code == 400
    assert _aggregates(api, rp) == []


@pytest.mark.parametrize("version", ["1.1", "latest"])
def test_missing_provider_is_404(api, version):
    path = _path(new_uuid())
    assert api.get(path, version=version).status_code == 404
    body = [new_uuid()] if version == "1.1" else {"aggregates": [new_uuid()], "resource_provider_generation": 0}
    assert api.put(path, body, version=version).status_code == 404


def test_routes_are_404_at_1_0(api):
    # aggregates.inc: aggregates API requests are available starting from version 1.1.
    agg = new_uuid()
    rp = api.create_provider(aggregates=[agg])
    assert api.get(_path(rp), version="1.0").status_code == 404
    assert api.put(_path(rp), [new_uuid()], version="1.0").status_code == 404
    assert _aggregates(api, rp) == [agg]


def test_put_before_1_19_leaves_the_generation_alone(api):
    # The reference only bumps the provider generation for aggregate changes from 1.19 on.
    rp = api.create_provider("agg-gen")
    before = _generation(api, rp)
    assert api.put(_path(rp), [new_uuid()], version="1.18").status_code == 200
    assert _generation(api, rp) == before
