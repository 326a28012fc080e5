"""Writers of allocations lock what they change in one order on PostgreSQL (a provider's inventory
rows by id, then its provider row), so that a claim and a release racing on one host never deadlock:
each deadlock costs both transactions PostgreSQL's deadlock_timeout (a second) before one is retried."""

from __future__ import annotations

import logging
import threading

import pytest
from apihelpers import Api, new_uuid

from berth.api.app import PlacementApp

ROUNDS = 25
WRITERS = 4


def _allocation(rp: str, vcpus: int = 1) -> dict:
    return {
        "allocations": {rp: {"resources": {"VCPU": vcpus, "MEMORY_MB": 64}}},
        "consumer_generation": None,
        "project_id": "p",
        "user_id": "u",
        "consumer_type": "INSTANCE",
    }


def _claim_and_release(app: PlacementApp, rp: str, failures: list[str]) -> None:
    """ROUNDS times, a consumer of its own claimed on ``rp`` and released; what was refused, in ``failures``."""
    api = Api(app)
    for _ in range(ROUNDS):
        consumer = new_uuid()
        put = api.put(f"/allocations/{consumer}", _allocation(rp))
        deleted = api.delete(f"/allocations/{consumer}")
        if put.status_code != 204 or deleted.status_code != 204:
            failures.append(f"{put.status_code} {put.data!r} / {deleted.status_code} {deleted.data!r}")


def test_claims_and_releases_racing_on_one_host_never_deadlock(db, caplog):
    if db.is_sqlite:
        pytest.skip("SQLite writers hold the database lock one at a time: nothing to deadlock")
    app = PlacementApp(db)
    setup = Api(app)
    rp = setup.create_provider("host", inventory={"VCPU": 64, "MEMORY_MB": 65536})
    failures: list[str] = []

    with caplog.at_level(logging.INFO, logger="berth.store.database"):
        threads = [threading.Thread(target=_claim_and_release, args=(app, rp, failures)) for _ in range(WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []
    deadlocks = [r.getMessage() for r in caplog.records if "deadlock" in r.getMessage()]
    assert deadlocks == []
    assert setup.get(f"/resource_providers/{rp}/usages").json_body["usages"] == {"VCPU": 0, "MEMORY_MB": 0}


def test_inventory_writers_racing_with_releases_never_deadlock(db, caplog):
    """PUT .../inventories (one statement) and POST/DELETE of one class beside claims and releases."""
    if db.is_sqlite:
        pytest.skip("SQLite writers hold the database lock one at a time: nothing to deadlock")
    app = PlacementApp(db)
    setup = Api(app)
    rp = setup.create_provider("host", inventory={"VCPU": 64, "MEMORY_MB": 65536})
    failures: list[str] = []

    def write_inventories() -> None:
        api = Api(app)
        for round_ in range(ROUNDS):
            generation = api.get(f"/resource_providers/{rp}").json_body["generation"]
            inventories = {"VCPU": {"total": 64, "reserved": round_ % 4}, "MEMORY_MB": {"total": 65536}}
            if round_ % 2:
                inventories["DISK_GB"] = {"total": 100}
            put = api.put(
                f"/resource_providers/{rp}/inventories",
                {"resource_provider_generation": generation, "inventories": inventories},
            )
            # A claim moved the generation meanwhile: a 409, as for any stale writer.
            if put.status_code not in (200, 409):
                failures.append(f"inventories: {put.status_code} {put.data!r}")

    with caplog.at_level(logging.INFO, logger="berth.store.database"):
        threads = [threading.Thread(target=_claim_and_release, args=(app, rp, failures)) for _ in range(WRITERS - 1)]
        threads.append(threading.Thread(target=write_inventories))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []
    assert [r.getMessage() for r in caplog.records if "deadlock" in r.getMessage()] == []
    usages = setup.get(f"/resource_providers/{rp}/usages").json_body["usages"]
    assert usages["VCPU"] == usages["MEMORY_MB"] == 0
