"""Cases where a client could tell Berth from OpenStack Placement, found by running real clients'
own tests against Berth: generations after a write, and the texts clients match on or show."""

from __future__ import annotations

from apihelpers import error_code, error_detail, new_uuid


def _generation(api, uuid):
    return api.get(f"/resource_providers/{uuid}").json_body["generation"]


def _message(response):
    """The detail's own message, after the status title that Placement (webob) puts first."""
    return error_detail(response).split("\n\n", 1)[-1].strip()


def _consumer_generation(api, consumer):
    return api.get(f"/allocations/{consumer}").json_body["consumer_generation"]


# --- generations --------------------------------------------------------------------------------


def test_emptying_a_consumer_moves_each_providers_generation_once(api):
    host = api.create_provider("host", inventory={"VCPU": 8, "MEMORY_MB": 1024})
    disk = api.create_provider("disk", inventory={"DISK_GB": 100})
    consumer = new_uuid()
    api.allocate(consumer, {host: {"VCPU": 2, "MEMORY_MB": 256}, disk: {"DISK_GB": 10}})
    before = {rp: _generation(api, rp) for rp in (host, disk)}

    r = api.put(
        f"/allocations/{consumer}",
        {
            "allocations": {},
            "consumer_generation": _consumer_generation(api, consumer),
            "project_id": "proj",
            "user_id": "user",
        },
        version="1.28",
    )

    assert r.status_code == 204, r.data
    assert {rp: _generation(api, rp) for rp in (host, disk)} == {rp: g + 1 for rp, g in before.items()}
    assert api.get(f"/resource_providers/{host}/usages").json_body["usages"] == {"VCPU": 0, "MEMORY_MB": 0}


def test_a_provider_left_and_taken_in_one_write_moves_once(api):
    # A revert as Nova writes it: the migration's allocations emptied, the instance's put back on the
    # same host, in one POST /allocations.
    host = api.create_provider("host", inventory={"VCPU": 8})
    instance, migration = new_uuid(), new_uuid()
    api.allocate(migration, {host: {"VCPU": 2}})
    before = _generation(api, host)

    r = api.post(
        "/allocations",
        {
            migration: {
                "allocations": {},
                "consumer_generation": _consumer_generation(api, migration),
                "project_id": "proj",
                "user_id": "user",
            },
            instance: {
                "allocations": {host: {"resources": {"VCPU": 2}}},
                "consumer_generation": None,
                "project_id": "proj",
                "user_id": "user",
            },
        },
        version="1.28",
    )

    assert r.status_code == 204, r.data
    assert _generation(api, host) == before + 1


def test_moving_a_consumer_leaves_the_source_generation_alone(api):
    # Placement moves the generation of the providers the new allocations are on, not of those left.
    source = api.create_provider("source", inventory={"VCPU": 8})
    target = api.create_provider("target", inventory={"VCPU": 8})
    consumer = new_uuid()
    api.allocate(consumer, {source: {"VCPU": 2}})
    before = {rp: _generation(api, rp) for rp in (source, target)}

    api.allocate(consumer, {target: {"VCPU": 2}}, generation=_consumer_generation(api, consumer))

    assert _generation(api, source) == before[source]
    assert _generation(api, target) == before[target] + 1


def test_delete_allocations_leaves_generations_alone(api):
    host = api.create_provider("host", inventory={"VCPU": 8})
    consumer = new_uuid()
    api.allocate(consumer, {host: {"VCPU": 2}})
    before = _generation(api, host)

    assert api.delete(f"/allocations/{consumer}").status_code == 204

    assert _generation(api, host) == before


# --- inventory in use: the wording of each refusal ---------------------------------------------------


def _host_in_use(api):
    host = api.create_provider("host", inventory={"VCPU": 8, "MEMORY_MB": 1024})
    api.allocate(new_uuid(), {host: {"VCPU": 1}})
    return host


def test_replacing_inventories_in_use_is_an_update_conflict(api):
    host = _host_in_use(api)
    r = api.put(
        f"/resource_providers/{host}/inventories",
        {"resource_provider_generation": _generation(api, host), "inventories": {"MEMORY_MB": {"total": 1024}}},
    )
    assert r.status_code == 409 and error_code(r) == "placement.inventory.inuse"
    assert _message(r) == (f"update conflict: Inventory for 'VCPU' on resource provider '{host}' in use.")


def test_deleting_an_inventory_in_use_names_the_class(api):
    host = _host_in_use(api)
    r = api.delete(f"/resource_providers/{host}/inventories/VCPU")
    assert r.status_code == 409 and error_code(r) == "placement.inventory.inuse"
    assert _message(r) == (
        f"Unable to delete inventory of class VCPU: Inventory for 'VCPU' on resource provider '{host}' in use."
    )


def test_deleting_all_inventories_in_use(api):
    host = _host_in_use(api)
    r = api.delete(f"/resource_providers/{host}/inventories")
    assert r.status_code == 409 and error_code(r) == "placement.inventory.inuse"
    assert _message(r) == (f"Inventory for 'VCPU' on resource provider '{host}' in use.")


# --- deliberate differences (docs/compatibility.md) --------------------------------------------------

_UNALLOCATABLE = {"total": 8, "min_unit": 4, "max_unit": 2}


def test_an_inventory_that_could_never_be_allocated_is_refused(api):
    host = api.create_provider("host")
    r = api.put(
        f"/resource_providers/{host}/inventories",
        {"resource_provider_generation": _generation(api, host), "inventories": {"VCPU": _UNALLOCATABLE}},
    )
    assert r.status_code == 400
    assert "The minimum unit is greater than the maximum unit." in error_detail(r)
    assert api.get(f"/resource_providers/{host}/inventories").json_body["inventories"] == {}


def test_a_stale_generation_is_refused_before_the_unallocatable_inventory(api):
    host = api.create_provider("host", inventory={"VCPU": 8})
    stale = _generation(api, host) - 1
    writes = [
        ("PUT", f"/resource_providers/{host}/inventories", {"inventories": {"VCPU": _UNALLOCATABLE}}),
        ("PUT", f"/resource_providers/{host}/inventories/VCPU", dict(_UNALLOCATABLE)),
        ("POST", f"/resource_providers/{host}/inventories", {"resource_class": "MEMORY_MB", **_UNALLOCATABLE}),
    ]
    for method, path, body in writes:
        r = api.request(method, path, {"resource_provider_generation": stale, **body})
        assert r.status_code == 409, (method, path, r.data)
        assert error_code(r) == "placement.concurrent_update"
