"""Writing allocations (PUT /allocations/{consumer}, POST /allocations) where a client could tell
Berth from OpenStack Placement 16.0.0: found by sending the same requests to both and comparing."""

from __future__ import annotations

from apihelpers import error_code, error_detail, new_uuid


def _body(allocations, generation, consumer_type="INSTANCE"):
    return {
        "allocations": {rp: {"resources": resources} for rp, resources in allocations.items()},
        "project_id": "proj",
        "user_id": "user",
        "consumer_generation": generation,
        "consumer_type": consumer_type,
    }


def test_a_null_generation_for_a_consumer_that_exists_is_worded_as_placement_words_it(api):
    rp = api.create_provider(inventory={"VCPU": 8})
    consumer = new_uuid()
    api.allocate(consumer, {rp: {"VCPU": 1}})
    r = api.put(f"/allocations/{consumer}", _body({rp: {"VCPU": 2}}, None))
    assert r.status_code == 409
    assert error_code(r) == "placement.concurrent_update"
    # Placement formats the null it was given as Python prints it.
    assert error_detail(r).endswith("consumer generation conflict - expected 1 but got None  ")


def test_a_stale_consumer_generation_is_refused_before_a_missing_provider(api):
    # Placement checks each consumer's generation before it looks up the providers and classes the
    # body names: the client hears of the conflict it retries on, not of a provider gone meanwhile.
    rp = api.create_provider(inventory={"VCPU": 8})
    consumer = new_uuid()
    api.allocate(consumer, {rp: {"VCPU": 1}})
    gone = new_uuid()
    for r in (
        api.put(f"/allocations/{consumer}", _body({gone: {"VCPU": 1}}, 7)),
        api.post("/allocations", {consumer: _body({gone: {"VCPU": 1}}, 7)}),
    ):
        assert r.status_code == 409, r.data
        assert error_code(r) == "placement.concurrent_update"
        assert error_detail(r).endswith("consumer generation conflict - expected 1 but got 7  ")
    # A new consumer given a generation: the same.
    r = api.post("/allocations", {new_uuid(): _body({gone: {"VCPU": 1}}, 7)})
    assert r.status_code == 409
    assert error_detail(r).endswith("consumer generation conflict - expected null but got 7  ")


def test_a_stale_consumer_generation_is_refused_before_an_unknown_class(api):
    rp = api.create_provider(inventory={"VCPU": 8})
    consumer = new_uuid()
    api.allocate(consumer, {rp: {"VCPU": 1}})
    r = api.put(f"/allocations/{consumer}", _body({rp: {"CUSTOM_NOPE": 1}}, 3))
    assert r.status_code == 409
    assert error_detail(r).endswith("consumer generation conflict - expected 1 but got 3  ")


def test_with_the_right_generation_a_missing_provider_is_still_a_bad_request(api):
    rp = api.create_provider(inventory={"VCPU": 8})
    consumer = new_uuid()
    api.allocate(consumer, {rp: {"VCPU": 1}})
    gone = new_uuid()
    r = api.put(f"/allocations/{consumer}", _body({gone: {"VCPU": 1}}, 1))
    assert r.status_code == 400
    assert error_detail(r).endswith(f"Allocation for resource provider '{gone}' that does not exist.  ")
    # Nothing was written: the consumer keeps its allocation and its generation.
    shown = api.get(f"/allocations/{consumer}").json_body
    assert shown["allocations"][rp]["resources"] == {"VCPU": 1}
    assert shown["consumer_generation"] == 1
