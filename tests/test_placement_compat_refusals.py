"""Refusals worded as OpenStack Placement 16.0.0 words them, found by sending the same requests to
both and comparing: the message of a policy's 403, and which fault of a query or body with several
a 400 names (jsonschema reports the first it meets, in the order of the schema's keys)."""

from __future__ import annotations

from apihelpers import error_detail, new_uuid


def _message(response):
    """The detail's own message, before the schema it quotes."""
    return error_detail(response).split("\n\n", 1)[-1].split("  Failed validating")[0].strip()


def test_a_policy_refusal_is_worded_as_placement_words_it(api):
    r = api.get("/traits", token="alice:proj")
    assert r.status_code == 403
    assert _message(r) == "Policy does not allow placement:traits:list to be performed."


def test_usages_of_a_consumer_type_starting_with_all_are_asked_for_not_refused(api):
    # Placement's pattern for consumer_type, "^[A-Z0-9_]+$|^all|^unknown$", does not anchor "all" at
    # its end: "allx" is a type no consumer has.
    rp = api.create_provider(inventory={"VCPU": 8})
    api.allocate(new_uuid(), {rp: {"VCPU": 1}}, project="p1")
    r = api.get("/usages?project_id=p1&consumer_type=allx")
    assert r.status_code == 200, r.data
    assert r.json_body == {"usages": {}}
    r = api.get("/usages?project_id=p1&consumer_type=lower")
    assert r.status_code == 400
    assert _message(r) == "Invalid query string parameters: 'lower' does not match '^[A-Z0-9_]+$|^all|^unknown$'"


def test_an_unknown_key_in_an_allocation_body_is_named_before_a_missing_one(api):
    consumer = new_uuid()
    r = api.put(f"/allocations/{consumer}", {"bogus": 1}, version="1.12")
    assert r.status_code == 400
    assert _message(r) == "JSON does not validate: Additional properties are not allowed ('bogus' was unexpected)"
    r = api.post("/allocations", {consumer: {"bogus": 1}})
    assert r.status_code == 400
    assert _message(r) == "JSON does not validate: Additional properties are not allowed ('bogus' was unexpected)"


def test_before_request_groups_a_missing_resources_is_named_before_an_unknown_key(api):
    r = api.get("/allocation_candidates?bogus=1", version="1.24")
    assert r.status_code == 400
    assert _message(r) == "Invalid query string parameters: 'resources' is a required property"


def test_the_candidates_schema_quoted_is_placements(api):
    r = api.get("/allocation_candidates?resources=VCPU:1&bogus=1", version="1.36")
    assert r.status_code == 400
    assert "'root_required': {'type': ['string']}" in error_detail(r)
    assert "'same_subtree': {'type': ['string']}" in error_detail(r)


def test_mappings_are_checked_as_placement_checks_them(api):
    # Placement's pattern for a mapping's key is not anchored: a key without a suffix character (the
    # unsuffixed group's "") is not checked, one with any is.
    rp = api.create_provider(inventory={"VCPU": 8})
    body = {
        "allocations": {rp: {"resources": {"VCPU": 1}}},
        "project_id": "proj",
        "user_id": "user",
        "consumer_generation": None,
        "consumer_type": "INSTANCE",
        "mappings": {"": []},
    }
    assert api.put(f"/allocations/{new_uuid()}", body).status_code == 204
    body["mappings"] = {"a.b": []}
    r = api.put(f"/allocations/{new_uuid()}", body)
    assert r.status_code == 400
    assert _message(r) == "JSON does not validate: [] should be non-empty"
