"""Writes on an inventory over its capacity (shrunk under its allocations): as Placement 16 allows,
a write that takes no more there than it frees there leaves it no worse and is taken (a migration's
hand-over moving a server's allocations to the migration consumer, a server shrinking); one that
takes more is refused. Without this, nothing could be moved off a host whose inventory shrank."""

from __future__ import annotations

from apihelpers import new_uuid


def _over_capacity_host(api):
    """A host with 8 VCPU, 6 of them held by one server, then shrunk to 4."""
    host = api.create_provider("host", inventory={"VCPU": 8, "MEMORY_MB": 4096})
    server = new_uuid()
    api.allocate(server, {host: {"VCPU": 6, "MEMORY_MB": 1024}})
    generation = api.get(f"/resource_providers/{host}").json_body["generation"]
    r = api.put(
        f"/resource_providers/{host}/inventories",
        {
            "resource_provider_generation": generation,
            "inventories": {"VCPU": {"total": 4}, "MEMORY_MB": {"total": 4096}},
        },
    )
    assert r.status_code == 200, r.data
    return host, server


def _consumer(api, consumer):
    return api.get(f"/allocations/{consumer}").json_body


def _rewrite(api, consumer, host, vcpus):
    """The body of a PUT of ``consumer``'s allocations on ``host`` as ``vcpus`` VCPU and 1 GB, at its
    current generation."""
    return {
        "allocations": {host: {"resources": {"VCPU": vcpus, "MEMORY_MB": 1024}}},
        "project_id": "proj",
        "user_id": "user",
        "consumer_generation": _consumer(api, consumer)["consumer_generation"],
        "consumer_type": "INSTANCE",
    }


def _move_body(api, host, server, migration, instance_goes_to):
    held = _consumer(api, server)
    return {
        server: {
            "allocations": instance_goes_to,
            "project_id": "proj",
            "user_id": "user",
            "consumer_generation": held["consumer_generation"],
            "consumer_type": "INSTANCE",
        },
        migration: {
            "allocations": {host: {"resources": {"VCPU": 6, "MEMORY_MB": 1024}}},
            "project_id": "proj",
            "user_id": "user",
            "consumer_generation": None,
            "consumer_type": "MIGRATION",
        },
    }


def test_a_migrations_hand_over_on_a_host_over_capacity_is_taken(api):
    host, server = _over_capacity_host(api)
    destination = api.create_provider("destination", inventory={"VCPU": 8, "MEMORY_MB": 4096})
    migration = new_uuid()
    body = _move_body(api, host, server, migration, {destination: {"resources": {"VCPU": 6, "MEMORY_MB": 1024}}})
    r = api.post("/allocations", body)
    assert r.status_code == 204, r.data
    assert _consumer(api, migration)["allocations"][host]["resources"] == {"VCPU": 6, "MEMORY_MB": 1024}
    assert _consumer(api, server)["allocations"][destination]["resources"] == {"VCPU": 6, "MEMORY_MB": 1024}
    assert api.get(f"/resource_providers/{host}/usages").json_body["usages"]["VCPU"] == 6
    # Once the migration's consumer lets go (a confirm), the host is within its capacity again.
    assert api.delete(f"/allocations/{migration}").status_code == 204
    assert api.get(f"/resource_providers/{host}/usages").json_body["usages"]["VCPU"] == 0


def test_a_write_taking_more_than_it_frees_on_a_host_over_capacity_is_refused(api):
    host, server = _over_capacity_host(api)
    r = api.put(f"/allocations/{server}", _rewrite(api, server, host, 7))
    assert r.status_code == 409, r.data
    assert "would exceed the capacity" in r.json_body["errors"][0]["detail"]
    assert _consumer(api, server)["allocations"][host]["resources"]["VCPU"] == 6
    # Another consumer, which frees nothing there, is refused any of it.
    api.allocate(new_uuid(), {host: {"VCPU": 1}}, expect=409)
    # Shrinking (or keeping) what it holds leaves the host no worse: taken.
    for vcpus in (6, 5):
        r = api.put(f"/allocations/{server}", _rewrite(api, server, host, vcpus))
        assert r.status_code == 204, r.data
    assert api.get(f"/resource_providers/{host}/usages").json_body["usages"]["VCPU"] == 5


def test_units_are_still_checked_on_what_a_write_may_take_again(api):
    host, server = _over_capacity_host(api)
    generation = api.get(f"/resource_providers/{host}").json_body["generation"]
    r = api.put(
        f"/resource_providers/{host}/inventories",
        {
            "resource_provider_generation": generation,
            "inventories": {"VCPU": {"total": 4, "step_size": 4, "max_unit": 4}, "MEMORY_MB": {"total": 4096}},
        },
    )
    assert r.status_code == 200, r.data
    r = api.put(f"/allocations/{server}", _rewrite(api, server, host, 6))
    assert r.status_code == 409, r.data
    assert "violate inventory constraints" in r.json_body["errors"][0]["detail"]
