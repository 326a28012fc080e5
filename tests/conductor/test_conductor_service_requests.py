"""The requests an operation makes of the service, counted by the service itself (``/metrics``): a
build or a move that selects its host has its lease taken by the scheduler's pick, in the pick's
own transaction, rather than by a ``PUT /berth/leases`` of its own before it."""

from __future__ import annotations

import pytest
import requests
from conductorhelpers import BIGGER, PLAIN, assert_books_agree, assert_nothing_left, lease_of, server
from prometheus_client.parser import text_string_to_metric_families

from berth.conductor.journal import DONE

pytestmark = pytest.mark.slow

LEASE = "/berth/leases/{consumer_uuid}"


def answered(placement, route, method):
    """How many requests of ``method`` on ``route`` the service answered, every status summed."""
    response = requests.get(f"{placement.url}/metrics", headers=placement.headers, timeout=10)
    response.raise_for_status()
    return sum(
        sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
        if sample.name == "berth_http_requests_total"
        and sample.labels.get("route") == route
        and sample.labels.get("method") == method
    )


def test_a_build_and_a_move_take_their_leases_with_the_pick(conductors, placement, clients, instance_uuid):
    conductor = conductors()
    leases, picks = answered(placement, LEASE, "PUT"), answered(placement, "/berth/pick", "POST")
    built = conductor.build(server(instance_uuid, PLAIN))
    assert built.state == DONE and conductor.runner.selector.last_path == "pick"
    assert answered(placement, "/berth/pick", "POST") == picks + 1
    assert answered(placement, LEASE, "PUT") == leases
    # Confirmed: the allocations stay, the lease is gone.
    assert placement.consumer(instance_uuid).allocations and lease_of(placement, instance_uuid) is None

    moved = conductor.resize(server(instance_uuid, PLAIN), BIGGER)
    assert moved.state == DONE and conductor.runner.selector.last_path == "pick"
    assert answered(placement, "/berth/pick", "POST") == picks + 2
    assert answered(placement, LEASE, "PUT") == leases
    assert conductor.confirm_resize(moved.id).state == DONE
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid, moved.request["migration_uuid"])
