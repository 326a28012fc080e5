"""Interleavings of two transactions on PostgreSQL, driven step by step on the store."""

import pytest
from apihelpers import Api, new_uuid
from dbhelpers import start_until_it_waits_on_a_lock

from berth.api.app import PlacementApp
from berth.domain.errors import DuplicateName, InventoryInUse
from berth.store.placement import inventories, providers
from berth.store.placement.allocations import ConsumerAllocations, replace_allocations


def test_inventory_delete_after_a_concurrent_claim_is_refused(db):
    if db.is_sqlite:
        pytest.skip("SQLite writers hold the database lock: no interleaving is possible")
    api = Api(PlacementApp(db))
    rp = api.create_provider("host", inventory={"VCPU": 8})
    with db.engine.connect() as deleting, db.engine.connect() as claiming, deleting.begin():
        provider = providers.get_provider(deleting, rp)
        # The deleting transaction has seen the inventory unused...
        row = inventories.list_inventories(deleting, provider["id"])["VCPU"]
        assert row["used"] == 0
        # ...when a claim commits on the other connection, before the delete is sent.
        with claiming.begin():
            replace_allocations(
                claiming,
                [
                    ConsumerAllocations(
                        new_uuid(), {rp: {"VCPU": 2}}, project_id="p", user_id="u", consumer_generation=None
                    )
                ],
            )
        with pytest.raises(InventoryInUse):
            inventories._delete_unused(deleting, provider, [("VCPU", row)], inventories.delete_refusal("VCPU"))
    assert api.get(f"/resource_providers/{rp}/usages").json_body["usages"] == {"VCPU": 2}


def test_provider_created_concurrently_under_the_same_name_is_a_conflict(db):
    if db.is_sqlite:
        pytest.skip("SQLite writers hold the database lock: no interleaving is possible")
    outcome = {}

    def second_creates():
        with db.engine.connect() as second, second.begin():
            try:
                providers.create_provider(second, uuid=new_uuid(), name="twin")
            except DuplicateName as error:
                outcome["error"] = error

    with db.engine.connect() as first, first.begin():
        providers.create_provider(first, uuid=new_uuid(), name="twin")
        # The second transaction finds the name free (the first row is not committed) and its
        # insert waits on the unique index...
        racer = start_until_it_waits_on_a_lock(db, second_creates)
        assert racer.is_alive(), outcome
        # ...until the first commits: then it is a 409, not an unhandled integrity error.
    racer.join(30)
    assert "Conflicting resource provider name: twin" in str(outcome.get("error"))


def test_inventory_put_that_loses_the_generation_race_while_waiting_is_a_generation_conflict(db):
    if db.is_sqlite:
        pytest.skip("SQLite writers hold the database lock: no interleaving is possible")
    api = Api(PlacementApp(db))
    rp = api.create_provider("host", inventory={"VCPU": 8})
    generation = api.get(f"/resource_providers/{rp}").json_body["generation"]
    outcome = {}

    def put_inventories():
        outcome["response"] = api.put(
            f"/resource_providers/{rp}/inventories",
            {"resource_provider_generation": generation, "inventories": {"VCPU": {"total": 16}}},
        )

    with db.engine.connect() as first, first.begin():
        # Another writer holds the provider row with its generation moved on...
        first.exec_driver_sql("UPDATE resource_providers SET generation = generation + 1 WHERE uuid = %s", (rp,))
        racer = start_until_it_waits_on_a_lock(db, put_inventories)
        assert racer.is_alive(), outcome
        # ...and commits while the PUT, whose snapshot still shows the old generation, waits.
    racer.join(30)
    response = outcome["response"]
    assert response.status_code == 409
    assert response.json_body["errors"][0]["code"] == "placement.concurrent_update"
    inventory = api.get(f"/resource_providers/{rp}/inventories").json_body["inventories"]["VCPU"]
    assert inventory["total"] == 8
