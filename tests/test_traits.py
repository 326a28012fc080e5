"""/traits, /traits/{name} and /resource_providers/{uuid}/traits, per the Placement API reference
(api-ref/source/traits.inc, resource_provider_traits.inc, parameters.yaml, generations.inc, errors.inc)."""

import pytest
from apihelpers import error_code, error_detail, new_uuid

AVX, SSE, AVX2 = "HW_CPU_X86_AVX", "HW_CPU_X86_SSE", "HW_CPU_X86_AVX2"


def _traits(api, query=""):
    r = api.get(f"/traits{query}")
    assert r.status_code == 200, r.data
    return r.json_body["traits"]


def _put_trait(api, name):
    r = api.put(f"/traits/{name}")
    assert r.status_code in (201, 204), r.data


def _provider_traits(api, rp):
    r = api.get(f"/resource_providers/{rp}/traits")
    assert r.status_code == 200, r.data
    return r.json_body


def _generation(api, rp):
    return api.get(f"/resource_providers/{rp}").json_body["generation"]


# --- GET /traits -----------------------------------------------------------------------------


def test_list_contains_standard_traits_and_no_custom_on_fresh_database(api):
    r = api.get("/traits")
    assert r.status_code == 200
    assert set(r.json_body) == {"traits"}
    names = r.json_body["traits"]
    assert {AVX, SSE, AVX2} <= set(names)
    assert not [n for n in names if n.startswith("CUSTOM_")]
    assert len(names) == len(set(names))


def test_list_name_in_filter_returns_only_existing_named_traits(api):
    # parameters.yaml trait_name_query example includes a nonexistent name.
    names = _traits(api, f"?name=in:{AVX},{SSE},HW_CPU_X86_INVALID_FEATURE")
    assert sorted(names) == sorted([AVX, SSE])


def test_list_name_in_filter_with_custom_traits(api):
    _put_trait(api, "CUSTOM_ONE")
    _put_trait(api, "CUSTOM_TWO")
    assert _traits(api, "?name=in:CUSTOM_ONE") == ["CUSTOM_ONE"]
    assert sorted(_traits(api, "?name=in:CUSTOM_ONE,CUSTOM_TWO,CUSTOM_THREE")) == ["CUSTOM_ONE", "CUSTOM_TWO"]
    assert _traits(api, "?name=in:CUSTOM_THREE") == []


def test_list_name_startswith_filter(api):
    assert _traits(api, "?name=startswith:CUSTOM") == []
    _put_trait(api, "CUSTOM_ALPHA")
    _put_trait(api, "CUSTOM_BETA")
    assert sorted(_traits(api, "?name=startswith:CUSTOM")) == ["CUSTOM_ALPHA", "CUSTOM_BETA"]
    assert _traits(api, "?name=startswith:CUSTOM_AL") == ["CUSTOM_ALPHA"]
    hw = _traits(api, "?name=startswith:HW_CPU_X86_")
    assert AVX in hw and SSE in hw
    assert all(n.startswith("HW_CPU_X86_") for n in hw)


def test_list_startswith_is_a_literal_prefix(api):
    _put_trait(api, "CUSTOM_A_B")
    _put_trait(api, "CUSTOM_AXB")
    # "_" is a literal character, not a wildcard.
    assert _traits(api, "?name=startswith:CUSTOM_A_") == ["CUSTOM_A_B"]


def test_list_associated_filter(api):
    assert _traits(api, "?associated=true") == []
    _put_trait(api, "CUSTOM_LINKED")
    _put_trait(api, "CUSTOM_LONELY")
    api.create_provider(traits=["CUSTOM_LINKED", AVX])
    assert sorted(_traits(api, "?associated=true")) == sorted(["CUSTOM_LINKED", AVX])
    unassociated = _traits(api, "?associated=false")
    assert "CUSTOM_LONELY" in unassociated and SSE in unassociated
    assert "CUSTOM_LINKED" not in unassociated and AVX not in unassociated
    everything = _traits(api)
    assert sorted(everything) == sorted(unassociated + ["CUSTOM_LINKED", AVX])


@pytest.mark.parametrize("true_value, false_value", [("True", "False"), ("TRUE", "FALSE"), ("true", "false")])
def test_list_associated_is_case_insensitive(api, true_value, false_value):
    api.create_provider(traits=["CUSTOM_LINKED"])
    assert _traits(api, f"?associated={true_value}") == ["CUSTOM_LINKED"]
    assert "CUSTOM_LINKED" not in _traits(api, f"?associated={false_value}")


def test_list_filters_are_anded(api):
    # traits.inc: if multiple different parameters are provided, the results are merged with AND.
    _put_trait(api, "CUSTOM_FREE")
    api.create_provider(traits=["CUSTOM_TAKEN", AVX])
    assert _traits(api, "?name=startswith:CUSTOM&associated=true") == ["CUSTOM_TAKEN"]
    assert _traits(api, "?name=startswith:CUSTOM&associated=false") == ["CUSTOM_FREE"]
    assert _traits(api, f"?name=in:{AVX},{SSE}&associated=true") == [AVX]
    assert _traits(api, f"?name=in:{AVX},{SSE}&associated=false") == [SSE]


@pytest.mark.parametrize(
    "query",
    [
        "?name=CUSTOM_FOO",  # no operator
        "?name=HW_CPU_X86_AVX",
        "?associated=maybe",
        "?associated=1",
        "?associated=",
        "?unknown=1",
    ],
)
def test_list_bad_filters_are_400(api, query):
    r = api.get(f"/traits{query}")
    assert r.status_code == 400
    assert r.json_body["errors"][0]["title"] == "Bad Request"


# --- PUT /traits/{name} ----------------------------------------------------------------------


def test_put_custom_trait_is_201_then_204_with_location(api):
    r = api.put("/traits/CUSTOM_NEW_TRAIT")
    assert r.status_code == 201
    assert r.headers["Location"].endswith("/traits/CUSTOM_NEW_TRAIT")
    assert r.data == b""
    r = api.put("/traits/CUSTOM_NEW_TRAIT")
    assert r.status_code == 204
    assert r.headers["Location"].endswith("/traits/CUSTOM_NEW_TRAIT")
    assert r.data == b""
    assert _traits(api, "?name=in:CUSTOM_NEW_TRAIT") == ["CUSTOM_NEW_TRAIT"]


@pytest.mark.parametrize("name", [AVX, "FOO", "CUSTOM_lower", "CUSTOM_BAD-NAME", "custom_x", "CUSTOM_" + "A" * 249])
def test_put_non_custom_or_invalid_trait_is_400(api, name):
    # traits.inc: 400 if trait name is not prefixed with CUSTOM_ (standard traits are read-only).
    before = _traits(api)
    r = api.put(f"/traits/{name}")
    assert r.status_code == 400
    assert _traits(api) == before


def test_put_custom_trait_of_255_characters_is_accepted(api):
    name = "CUSTOM_" + "A" * 248
    assert api.put(f"/traits/{name}").status_code == 201
    assert api.get(f"/traits/{name}").status_code == 204


# --- GET /traits/{name} ----------------------------------------------------------------------


def test_get_existing_traits_is_204_without_body(api):
    r = api.get(f"/traits/{AVX}")
    assert r.status_code == 204
    assert r.data == b""
    _put_trait(api, "CUSTOM_HERE")
    r = api.get("/traits/CUSTOM_HERE")
    assert r.status_code == 204
    assert r.data == b""


@pytest.mark.parametrize("name", ["CUSTOM_NOT_HERE", "HW_CPU_X86_NO_SUCH_THING"])
def test_get_missing_trait_is_404(api, name):
    r = api.get(f"/traits/{name}")
    assert r.status_code == 404
    assert r.json_body["errors"][0]["title"] == "Not Found"


# --- DELETE /traits/{name} -------------------------------------------------------------------


def test_delete_custom_trait(api):
    _put_trait(api, "CUSTOM_DOOMED")
    r = api.delete("/traits/CUSTOM_DOOMED")
    assert r.status_code == 204
    assert r.data == b""
    assert api.get("/traits/CUSTOM_DOOMED").status_code == 404
    assert "CUSTOM_DOOMED" not in _traits(api)


def test_delete_standard_trait_is_400(api):
    r = api.delete(f"/traits/{AVX}")
    assert r.status_code == 400
    assert api.get(f"/traits/{AVX}").status_code == 204


def test_delete_associated_trait_is_409(api):
    rp = api.create_provider(traits=["CUSTOM_STUCK"])
    r = api.delete("/traits/CUSTOM_STUCK")
    assert r.status_code == 409
    assert api.get("/traits/CUSTOM_STUCK").status_code == 204
    assert _provider_traits(api, rp)["traits"] == ["CUSTOM_STUCK"]
    # Once dissociated it can go.
    assert api.delete(f"/resource_providers/{rp}/traits").status_code == 204
    assert api.delete("/traits/CUSTOM_STUCK").status_code == 204


def test_delete_missing_trait_is_404(api):
    assert api.delete("/traits/CUSTOM_NEVER_WAS").status_code == 404


def test_deleted_trait_can_be_created_again(api):
    _put_trait(api, "CUSTOM_PHOENIX")
    assert api.delete("/traits/CUSTOM_PHOENIX").status_code == 204
    assert api.put("/traits/CUSTOM_PHOENIX").status_code == 201


# --- provider traits -------------------------------------------------------------------------


def test_new_provider_has_no_traits(api):
    rp = api.create_provider()
    body = _provider_traits(api, rp)
    assert body == {"traits": [], "resource_provider_generation": _generation(api, rp)}


def test_put_provider_traits_sets_and_bumps_generation(api):
    _put_trait(api, "CUSTOM_RACK_1")
    rp = api.create_provider()
    gen = _generation(api, rp)
    r = api.put(
        f"/resource_providers/{rp}/traits", {"traits": [AVX, "CUSTOM_RACK_1"], "resource_provider_generation": gen}
    )
    assert r.status_code == 200
    assert sorted(r.json_body["traits"]) == sorted([AVX, "CUSTOM_RACK_1"])
    new_gen = r.json_body["resource_provider_generation"]
    assert new_gen != gen
    assert _generation(api, rp) == new_gen
    body = _provider_traits(api, rp)
    assert sorted(body["traits"]) == sorted([AVX, "CUSTOM_RACK_1"])
    assert body["resource_provider_generation"] == new_gen


def test_put_provider_traits_replaces_all(api):
    rp = api.create_provider(traits=[AVX, AVX2])
    gen = _generation(api, rp)
    r = api.put(f"/resource_providers/{rp}/traits", {"traits": [SSE], "resource_provider_generation": gen})
    assert r.status_code == 200
    assert r.json_body["traits"] == [SSE]
    assert _provider_traits(api, rp)["traits"] == [SSE]
    gen = r.json_body["resource_provider_generation"]
    r = api.put(f"/resource_providers/{rp}/traits", {"traits": [], "resource_provider_generation": gen})
    assert r.status_code == 200
    assert r.json_body["traits"] == []
    assert _provider_traits(api, rp)["traits"] == []


def test_provider_traits_are_per_provider(api):
    rp1 = api.create_provider(traits=[AVX])
    rp2 = api.create_provider(traits=[SSE])
    assert _provider_traits(api, rp1)["traits"] == [AVX]
    assert _provider_traits(api, rp2)["traits"] == [SSE]


@pytest.mark.parametrize("version", ["1.23", "latest"])
def test_put_provider_traits_with_stale_generation_is_409_concurrent_update(api, version):
    # resource_provider_traits.inc / generations.inc: mismatch -> 409 placement.concurrent_update.
    rp = api.create_provider(traits=[AVX])
    gen = _generation(api, rp)
    r = api.put(
        f"/resource_providers/{rp}/traits", {"traits": [SSE], "resource_provider_generation": gen - 1}, version=version
    )
    assert r.status_code == 409
    assert error_code(r) == "placement.concurrent_update"
    assert _provider_traits(api, rp) == {"traits": [AVX], "resource_provider_generation": gen}


def test_put_provider_traits_with_stale_generation_before_1_23_has_no_code(api):
    rp = api.create_provider()
    r = api.put(
        f"/resource_providers/{rp}/traits", {"traits": [SSE], "resource_provider_generation": 99}, version="1.22"
    )
    assert r.status_code == 409
    assert "code" not in r.json_body["errors"][0]


def test_put_provider_traits_with_unknown_trait_is_400(api):
    rp = api.create_provider(traits=[AVX])
    gen = _generation(api, rp)
    r = api.put(
        f"/resource_providers/{rp}/traits",
        {"traits": [SSE, "CUSTOM_NO_SUCH_TRAIT"], "resource_provider_generation": gen},
    )
    assert r.status_code == 400
    assert "CUSTOM_NO_SUCH_TRAIT" in r.json_body["errors"][0]["detail"]
    assert _provider_traits(api, rp) == {"traits": [AVX], "resource_provider_generation": gen}


@pytest.mark.parametrize(
    "body",
    [
        {"traits": [AVX]},  # no generation
        {"resource_provider_generation": 0},  # no traits
        {"traits": AVX, "resource_provider_generation": 0},  # not a list
        {"traits": [AVX], "resource_provider_generation": 0, "x": 1},
    ],
)
def test_put_provider_traits_malformed_body_is_400(api, body):
    rp = api.create_provider()
    r = api.put(f"/resource_providers/{rp}/traits", body)
    assert r.status_code == 400
    assert _provider_traits(api, rp)["traits"] == []


def test_delete_provider_traits(api):
    rp = api.create_provider(traits=[AVX, "CUSTOM_GONE_SOON"])
    gen = _generation(api, rp)
    r = api.delete(f"/resource_providers/{rp}/traits")
    assert r.status_code == 204
    assert r.data == b""
    body = _provider_traits(api, rp)
    assert body["traits"] == []
    # generations.inc: the generation is updated every time its entity is changed.
    assert body["resource_provider_generation"] != gen
    # The trait itself still exists, it is only dissociated.
    assert api.get("/traits/CUSTOM_GONE_SOON").status_code == 204


@pytest.mark.parametrize(
    "method, body",
    [
        ("GET", None),
        ("PUT", {"traits": [AVX], "resource_provider_generation": 0}),
        ("DELETE", None),
    ],
)
def test_provider_traits_of_missing_provider_is_404(api, method, body):
    r = api.request(method, f"/resource_providers/{new_uuid()}/traits", body)
    assert r.status_code == 404


# --- microversion boundaries -----------------------------------------------------------------


@pytest.mark.parametrize(
    "method, path",
    [
        ("GET", "/traits"),
        ("GET", f"/traits/{AVX}"),
        ("PUT", "/traits/CUSTOM_EARLY"),
        ("DELETE", "/traits/CUSTOM_EXISTING"),
    ],
)
def test_trait_routes_are_404_at_1_5(api, method, path):
    # traits.inc: traits API requests are available starting from version 1.6.
    _put_trait(api, "CUSTOM_EXISTING")
    r = api.request(method, path, version="1.5")
    assert r.status_code == 404
    assert api.get("/traits/CUSTOM_EARLY").status_code == 404
    assert api.get("/traits/CUSTOM_EXISTING").status_code == 204


@pytest.mark.parametrize(
    "method, body",
    [
        ("GET", None),
        ("PUT", {"traits": [], "resource_provider_generation": 0}),
        ("DELETE", None),
    ],
)
def test_provider_traits_routes_are_404_at_1_5(api, method, body):
    # resource_provider_traits.inc: available starting from version 1.6.
    rp = api.create_provider(traits=[AVX])
    r = api.request(method, f"/resource_providers/{rp}/traits", body, version="1.5")
    assert r.status_code == 404
    assert _provider_traits(api, rp)["traits"] == [AVX]


def test_trait_routes_work_at_1_6(api):
    assert api.put("/traits/CUSTOM_SIX", version="1.6").status_code == 201
    assert api.get("/traits/CUSTOM_SIX", version="1.6").status_code == 204
    rp = api.create_provider()
    r = api.put(
        f"/resource_providers/{rp}/traits",
        {"traits": ["CUSTOM_SIX"], "resource_provider_generation": _generation(api, rp)},
        version="1.6",
    )
    assert r.status_code == 200
    assert api.get(f"/resource_providers/{rp}/traits", version="1.6").json_body["traits"] == ["CUSTOM_SIX"]
    assert api.get("/traits?associated=true", version="1.6").json_body["traits"] == ["CUSTOM_SIX"]


def test_unknown_name_operator_filters_nothing(api):
    # As the reference: an operator other than in/startswith is ignored, a value without one is a 400.
    everything = api.get("/traits").json_body["traits"]
    assert api.get("/traits?name=foo:bar").json_body["traits"] == everything


def test_put_provider_traits_answers_exactly_what_get_reads_back(api):
    _put_trait(api, "CUSTOM_Z_LAST")
    _put_trait(api, "CUSTOM_A_FIRST")
    rp = api.create_provider()
    r = api.put(
        f"/resource_providers/{rp}/traits",
        {"traits": ["CUSTOM_Z_LAST", SSE, "CUSTOM_A_FIRST", AVX], "resource_provider_generation": _generation(api, rp)},
    )
    assert r.status_code == 200, r.data
    assert r.json_body == _provider_traits(api, rp)
    assert r.json_body["traits"] == sorted([AVX, SSE, "CUSTOM_A_FIRST", "CUSTOM_Z_LAST"])


def test_put_provider_traits_checks_provider_then_generation_then_names(api):
    body = {"traits": ["CUSTOM_NEVER_MADE"], "resource_provider_generation": 5}
    assert api.put(f"/resource_providers/{new_uuid()}/traits", body).status_code == 404
    rp = api.create_provider(traits=[AVX])
    gen = _generation(api, rp)
    r = api.put(f"/resource_providers/{rp}/traits", body)
    assert r.status_code == 409 and error_code(r) == "placement.concurrent_update"
    r = api.put(f"/resource_providers/{rp}/traits", {**body, "resource_provider_generation": gen})
    assert r.status_code == 400 and "CUSTOM_NEVER_MADE" in error_detail(r)
    assert _provider_traits(api, rp) == {"traits": [AVX], "resource_provider_generation": gen}
