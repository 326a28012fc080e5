"""Many processes racing for the last units of one provider through a real multi-worker server."""

from __future__ import annotations

import uuid
from concurrent.futures import ProcessPoolExecutor

import pytest
from livehelpers import live_on

from berth.testbed.client import Client

CAPACITY = 10
CLAIMERS = 8
ATTEMPTS_PER_CLAIMER = 6


@pytest.fixture(params=["sqlite", "postgresql"])
def live(request, tmp_path):
    yield from live_on(request, tmp_path, "live", workers=3)


def _claim(args):
    base, provider, attempts = args
    client = Client(base, version="latest")
    results = []
    try:
        for _ in range(attempts):
            consumer = str(uuid.uuid4())
            r = client.request(
                "PUT",
                f"/allocations/{consumer}",
                {
                    "allocations": {provider: {"resources": {"VCPU": 1}}},
                    "project_id": "p",
                    "user_id": "u",
                    "consumer_generation": None,
                    "consumer_type": "INSTANCE",
                },
            )
            results.append((r.status_code, consumer, r.text))
    finally:
        client.close()
    return results


def test_racing_claimers_get_exactly_the_capacity(live):
    provider = str(uuid.uuid4())
    client = live.client()
    r = client.request("POST", "/resource_providers", {"name": "host", "uuid": provider})
    assert r.status_code == 200
    r = client.request(
        "PUT",
        f"/resource_providers/{provider}/inventories",
        {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": CAPACITY}}},
    )
    assert r.status_code == 200

    with ProcessPoolExecutor(CLAIMERS) as pool:
        outcomes = [
            o for batch in pool.map(_claim, [(live.url, provider, ATTEMPTS_PER_CLAIMER)] * CLAIMERS) for o in batch
        ]

    statuses = [status for status, _, _ in outcomes]
    assert set(statuses) <= {204, 409}, [o for o in outcomes if o[0] not in (204, 409)][:3]
    granted = {consumer for status, consumer, _ in outcomes if status == 204}
    assert len(granted) == CAPACITY
    usages = client.get(f"/resource_providers/{provider}/usages").json()
    assert usages["usages"] == {"VCPU": CAPACITY}
    held = client.get(f"/resource_providers/{provider}/allocations").json()
    assert set(held["allocations"]) == granted
    client.close()
