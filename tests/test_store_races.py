"""Interleavings of two transactions on PostgreSQL, driven step by step on the store."""
import pytest

from apihelpers import Api, new_uuid
from berth.api.app import PlacementApp
from berth.domain.errors import InventoryInUse
from berth.store import inventories, providers
from berth.store.allocations import ConsumerAllocations, replace_allocations


def test_inventory_delete_after_a_concurrent_claim_is_refused(db):
    if db.is_sqlite:
        pytest.skip("SQLite writers hold the database lock: no interleaving is possible")
    api = Api(PlacementApp(db))
    rp = api.create_provider("host", inventory={"VCPU": 8})
    with db.engine.connect() as deleting, db.engine.connect() as claiming:
        with deleting.begin():
            provider = providers.get_provider(deleting, rp)
            # The deleting transaction has seen the inventory unused...
            row = inventories.list_inventories(deleting, provider["id"])["VCPU"]
            assert row["used"] == 0
            # ...when a claim commits on the other connection, before the delete is sent.
            with claiming.begin():
                replace_allocations(claiming, [ConsumerAllocations(
                    new_uuid(), {rp: {"VCPU": 2}}, project_id="p", user_id="u", consumer_generation=None)])
            with pytest.raises(InventoryInUse):
                inventories._delete_unused(deleting, provider, [("VCPU", row)])
    assert api.get(f"/resource_providers/{rp}/usages").json_body["usages"] == {"VCPU": 2}
