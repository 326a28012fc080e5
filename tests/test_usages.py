"""/resource_providers/{uuid}/usages and /usages, per the Placement API reference
(api-ref/source/usages.inc, samples/usages/get-usages-1.38.json, parameters.yaml).

The reference's resource_provider_usages.inc is not in the local index; the provider usages cases
follow parameters.yaml ``resource_provider_usages`` ("how much each class of resource is being
consumed on this resource provider") and the response fields resource_provider_generation/usages.
"""

import pytest
from apihelpers import new_uuid

PROJECT, OTHER_PROJECT = "proj", "proj-b"  # "proj" is api.allocate's default project
ALICE, BOB = "alice", "bob"


def _provider_usages(api, rp, version=None):
    r = api.get(f"/resource_providers/{rp}/usages", version=version)
    assert r.status_code == 200, r.data
    return r.json_body


def _usages(api, query, version=None):
    r = api.get(f"/usages?{query}", version=version)
    assert r.status_code == 200, r.data
    assert set(r.json_body) == {"usages"}
    return r.json_body["usages"]


def _allocate_untyped(api, consumer, allocations, project=PROJECT, user=ALICE):
    """Allocations written before 1.38 carry no consumer type: they count as ``unknown``."""
    body = {
        "allocations": {rp: {"resources": res} for rp, res in allocations.items()},
        "project_id": project,
        "user_id": user,
        "consumer_generation": None,
    }
    r = api.put(f"/allocations/{consumer}", body, version="1.37")
    assert r.status_code == 204, r.data


# --- provider usages -------------------------------------------------------------------------


def test_provider_without_inventory_has_empty_usages(api):
    rp = api.create_provider()
    body = _provider_usages(api, rp)
    assert body == {"resource_provider_generation": 0, "usages": {}}


def test_every_class_with_inventory_is_reported_zero_when_unused(api):
    api.put("/resource_classes/CUSTOM_WIDGET")
    rp = api.create_provider(inventory={"VCPU": 8, "MEMORY_MB": 4096, "DISK_GB": 100, "CUSTOM_WIDGET": 5})
    body = _provider_usages(api, rp)
    assert body["usages"] == {"VCPU": 0, "MEMORY_MB": 0, "DISK_GB": 0, "CUSTOM_WIDGET": 0}
    assert body["resource_provider_generation"] == api.get(f"/resource_providers/{rp}").json_body["generation"]


def test_provider_usages_sum_allocations(api):
    rp = api.create_provider(inventory={"VCPU": 8, "MEMORY_MB": 4096, "DISK_GB": 100})
    other = api.create_provider(inventory={"VCPU": 8})
    c1, c2 = new_uuid(), new_uuid()
    api.allocate(c1, {rp: {"VCPU": 1, "MEMORY_MB": 512}})
    api.allocate(c2, {rp: {"VCPU": 2, "MEMORY_MB": 256}, other: {"VCPU": 4}}, project=OTHER_PROJECT)
    body = _provider_usages(api, rp)
    assert body["usages"] == {"VCPU": 3, "MEMORY_MB": 768, "DISK_GB": 0}
    assert body["resource_provider_generation"] == api.get(f"/resource_providers/{rp}").json_body["generation"]
    assert _provider_usages(api, other)["usages"] == {"VCPU": 4}

    assert api.delete(f"/allocations/{c2}").status_code == 204
    assert _provider_usages(api, rp)["usages"] == {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 0}
    assert _provider_usages(api, other)["usages"] == {"VCPU": 0}


def test_provider_usages_follow_replaced_allocations(api):
    rp = api.create_provider(inventory={"VCPU": 8, "DISK_GB": 100})
    consumer = new_uuid()
    api.allocate(consumer, {rp: {"VCPU": 2}})
    gen = api.get(f"/allocations/{consumer}").json_body["consumer_generation"]
    api.allocate(consumer, {rp: {"DISK_GB": 10}}, generation=gen)
    assert _provider_usages(api, rp)["usages"] == {"VCPU": 0, "DISK_GB": 10}


@pytest.mark.parametrize("version", ["1.0", "1.9", "latest"])
def test_provider_usages_available_at_all_versions(api, version):
    rp = api.create_provider(inventory={"VCPU": 4})
    api.allocate(new_uuid(), {rp: {"VCPU": 1}})
    assert _provider_usages(api, rp, version=version)["usages"] == {"VCPU": 1}


def test_provider_usages_of_missing_provider_is_404(api):
    r = api.get(f"/resource_providers/{new_uuid()}/usages")
    assert r.status_code == 404
    assert r.json_body["errors"][0]["title"] == "Not Found"


# --- /usages: request validation ---------------------------------------------------------------


def test_usages_is_404_before_1_9(api):
    # usages.inc: usages API requests are available starting from version 1.9.
    assert api.get(f"/usages?project_id={PROJECT}", version="1.8").status_code == 404
    assert api.get(f"/usages?project_id={PROJECT}", version="1.9").status_code == 200


@pytest.mark.parametrize("version", ["1.9", "latest"])
@pytest.mark.parametrize(
    "query",
    [
        "",  # project_id is required
        f"user_id={ALICE}",
        "project_id=",
        f"project_id={PROJECT}&user_id=",
        "project_id=" + "x" * 256,
        f"project_id={PROJECT}&dummy=1",
    ],
)
def test_usages_bad_query_is_400(api, version, query):
    r = api.get(f"/usages?{query}", version=version)
    assert r.status_code == 400
    assert r.json_body["errors"][0]["title"] == "Bad Request"


def test_consumer_type_parameter_is_not_accepted_before_1_38(api):
    # parameters.yaml consumer_type_req: min_version 1.38.
    r = api.get(f"/usages?project_id={PROJECT}&consumer_type=INSTANCE", version="1.37")
    assert r.status_code == 400


@pytest.mark.parametrize("consumer_type", ["instance", "IN-STANCE", ""])
def test_malformed_consumer_type_is_400(api, consumer_type):
    # parameters.yaml consumer_type_req: numbers, A-Z and _ (or all / unknown).
    r = api.get(f"/usages?project_id={PROJECT}&consumer_type={consumer_type}", version="1.38")
    assert r.status_code == 400


@pytest.mark.parametrize("version", ["1.9", "1.37", "1.38", "latest"])
def test_unknown_project_has_empty_usages(api, version):
    rp = api.create_provider(inventory={"VCPU": 8})
    api.allocate(new_uuid(), {rp: {"VCPU": 1}})
    assert _usages(api, "project_id=nobody-here", version=version) == {}
    assert _usages(api, f"project_id={PROJECT}&user_id=nobody-here", version=version) == {}


# --- /usages 1.9 - 1.37: flat sums -----------------------------------------------------------


@pytest.fixture
def populated(api):
    rp1 = api.create_provider(inventory={"VCPU": 16, "MEMORY_MB": 8192, "DISK_GB": 500})
    rp2 = api.create_provider(inventory={"VCPU": 16, "DISK_GB": 500})
    # PROJECT/ALICE: two INSTANCE consumers, one spanning both providers.
    api.allocate(new_uuid(), {rp1: {"VCPU": 1, "MEMORY_MB": 128, "DISK_GB": 5}}, user=ALICE)
    api.allocate(new_uuid(), {rp1: {"VCPU": 1, "MEMORY_MB": 256}, rp2: {"DISK_GB": 10}}, user=ALICE)
    # PROJECT/BOB: a MIGRATION consumer and an untyped (pre-1.38) consumer.
    api.allocate(new_uuid(), {rp2: {"VCPU": 2, "DISK_GB": 5}}, user=BOB, consumer_type="MIGRATION")
    _allocate_untyped(api, new_uuid(), {rp1: {"VCPU": 4, "MEMORY_MB": 512}}, user=BOB)
    # Another project entirely.
    api.allocate(new_uuid(), {rp1: {"VCPU": 8, "MEMORY_MB": 1024, "DISK_GB": 100}}, project=OTHER_PROJECT, user=ALICE)
    return rp1, rp2


@pytest.mark.parametrize("version", ["1.9", "1.37"])
def test_flat_project_usages(api, populated, version):
    assert _usages(api, f"project_id={PROJECT}", version=version) == {"VCPU": 8, "MEMORY_MB": 896, "DISK_GB": 20}
    assert _usages(api, f"project_id={OTHER_PROJECT}", version=version) == {
        "VCPU": 8,
        "MEMORY_MB": 1024,
        "DISK_GB": 100,
    }


@pytest.mark.parametrize("version", ["1.9", "1.37"])
def test_flat_project_and_user_usages(api, populated, version):
    assert _usages(api, f"project_id={PROJECT}&user_id={ALICE}", version=version) == {
        "VCPU": 2,
        "MEMORY_MB": 384,
        "DISK_GB": 15,
    }
    assert _usages(api, f"project_id={PROJECT}&user_id={BOB}", version=version) == {
        "VCPU": 6,
        "MEMORY_MB": 512,
        "DISK_GB": 5,
    }
    assert _usages(api, f"project_id={OTHER_PROJECT}&user_id={BOB}", version=version) == {}


def test_flat_usages_drop_deleted_allocations(api):
    rp = api.create_provider(inventory={"VCPU": 8})
    keep, drop = new_uuid(), new_uuid()
    api.allocate(keep, {rp: {"VCPU": 1}})
    api.allocate(drop, {rp: {"VCPU": 3}})
    assert _usages(api, f"project_id={PROJECT}", version="1.9") == {"VCPU": 4}
    assert api.delete(f"/allocations/{drop}").status_code == 204
    assert _usages(api, f"project_id={PROJECT}", version="1.9") == {"VCPU": 1}


# --- /usages 1.38: grouped by consumer type ------------------------------------------------------


@pytest.mark.parametrize("version", ["1.38", "latest"])
def test_usages_grouped_by_consumer_type(api, populated, version):
    # usages.inc + samples/usages/get-usages-1.38.json: {type: {consumer_count, CLASS: amount}}.
    assert _usages(api, f"project_id={PROJECT}", version=version) == {
        "INSTANCE": {"consumer_count": 2, "VCPU": 2, "MEMORY_MB": 384, "DISK_GB": 15},
        "MIGRATION": {"consumer_count": 1, "VCPU": 2, "DISK_GB": 5},
        "unknown": {"consumer_count": 1, "VCPU": 4, "MEMORY_MB": 512},
    }
    assert _usages(api, f"project_id={OTHER_PROJECT}", version=version) == {
        "INSTANCE": {"consumer_count": 1, "VCPU": 8, "MEMORY_MB": 1024, "DISK_GB": 100},
    }


def test_grouped_usages_with_user(api, populated):
    assert _usages(api, f"project_id={PROJECT}&user_id={BOB}") == {
        "MIGRATION": {"consumer_count": 1, "VCPU": 2, "DISK_GB": 5},
        "unknown": {"consumer_count": 1, "VCPU": 4, "MEMORY_MB": 512},
    }
    assert _usages(api, f"project_id={PROJECT}&user_id={ALICE}&consumer_type=INSTANCE") == {
        "INSTANCE": {"consumer_count": 2, "VCPU": 2, "MEMORY_MB": 384, "DISK_GB": 15},
    }
    assert _usages(api, f"project_id={PROJECT}&user_id={ALICE}&consumer_type=MIGRATION") == {}


def test_filter_by_consumer_type(api, populated):
    assert _usages(api, f"project_id={PROJECT}&consumer_type=INSTANCE") == {
        "INSTANCE": {"consumer_count": 2, "VCPU": 2, "MEMORY_MB": 384, "DISK_GB": 15},
    }
    assert _usages(api, f"project_id={PROJECT}&consumer_type=MIGRATION") == {
        "MIGRATION": {"consumer_count": 1, "VCPU": 2, "DISK_GB": 5},
    }


def test_consumer_type_all_groups_everything_under_all(api, populated):
    # parameters.yaml consumer_type_req: ``all`` groups all results under one key, ``all``.
    assert _usages(api, f"project_id={PROJECT}&consumer_type=all") == {
        "all": {"consumer_count": 4, "VCPU": 8, "MEMORY_MB": 896, "DISK_GB": 20},
    }
    assert _usages(api, f"project_id={PROJECT}&user_id={ALICE}&consumer_type=all") == {
        "all": {"consumer_count": 2, "VCPU": 2, "MEMORY_MB": 384, "DISK_GB": 15},
    }


def test_consumer_type_unknown_selects_untyped_consumers(api, populated):
    # parameters.yaml consumer_type_req: ``unknown`` groups results under one key, ``unknown``.
    assert _usages(api, f"project_id={PROJECT}&consumer_type=unknown") == {
        "unknown": {"consumer_count": 1, "VCPU": 4, "MEMORY_MB": 512},
    }
    assert _usages(api, f"project_id={OTHER_PROJECT}&consumer_type=unknown") == {}


@pytest.mark.parametrize("consumer_type", ["COW", "ALL", "UNKNOWN"])
def test_consumer_type_without_consumers_is_empty(api, populated, consumer_type):
    assert _usages(api, f"project_id={PROJECT}&consumer_type={consumer_type}") == {}


def test_consumer_count_drops_when_consumer_allocations_are_deleted(api):
    rp = api.create_provider(inventory={"VCPU": 8})
    a, b = new_uuid(), new_uuid()
    api.allocate(a, {rp: {"VCPU": 1}})
    api.allocate(b, {rp: {"VCPU": 2}})
    assert _usages(api, f"project_id={PROJECT}") == {"INSTANCE": {"consumer_count": 2, "VCPU": 3}}
    assert api.delete(f"/allocations/{a}").status_code == 204
    assert _usages(api, f"project_id={PROJECT}") == {"INSTANCE": {"consumer_count": 1, "VCPU": 2}}
    assert api.delete(f"/allocations/{b}").status_code == 204
    assert _usages(api, f"project_id={PROJECT}") == {}
    assert _usages(api, f"project_id={PROJECT}&consumer_type=all") == {}


def test_consumer_moves_between_types(api):
    rp = api.create_provider(inventory={"VCPU": 8})
    consumer = new_uuid()
    api.allocate(consumer, {rp: {"VCPU": 2}}, consumer_type="INSTANCE")
    gen = api.get(f"/allocations/{consumer}").json_body["consumer_generation"]
    api.allocate(consumer, {rp: {"VCPU": 2}}, consumer_type="MIGRATION", generation=gen)
    assert _usages(api, f"project_id={PROJECT}") == {"MIGRATION": {"consumer_count": 1, "VCPU": 2}}
