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


CONSUMER = "/allocations/{consumer_uuid}"


def consumer_requests(placement):
    """The service's count of the requests that read, delete or release one consumer's books."""
    return {
        "read": answered(placement, CONSUMER, "GET"),
        "deleted": answered(placement, CONSUMER, "DELETE"),
        "lease released": answered(placement, LEASE, "DELETE"),
        "written": answered(placement, "/allocations", "POST"),
    }


def made(placement, before):
    after = consumer_requests(placement)
    return {what: after[what] - before[what] for what in after if after[what] != before[what]}


def test_no_operation_reads_or_releases_what_it_knows_already(conductors, placement, clients, instance_uuid):
    """The host lands a claim the pick wrote as it plans it without reading it again; a move's
    reservation goes with its lease; a consumer that is to hold nothing is deleted, unread; and a
    delete whose host freed everything asks the service for nothing more."""
    conductor = conductors()
    before = consumer_requests(placement)
    assert conductor.build(server(instance_uuid, PLAIN)).state == DONE
    assert made(placement, before) == {}
    assert_books_agree(placement, clients)

    before = consumer_requests(placement)
    moved = conductor.resize(server(instance_uuid, PLAIN), BIGGER)
    assert moved.state == DONE
    # The source read from the books (the servers API passes the server's), the reservation
    # released by releasing its lease and nothing after it, and the destination's one read of each
    # consumer before its one write of both.
    assert made(placement, before) == {"read": 3, "lease released": 1, "written": 1}

    before = consumer_requests(placement)
    assert conductor.confirm_resize(moved.id).state == DONE
    # The source makes sure the destination claimed (a read of the migration), then deletes the
    # migration's hold on it, with no read of its own.
    assert made(placement, before) == {"read": 1, "deleted": 1}
    assert_books_agree(placement, clients)

    before = consumer_requests(placement)
    conductor.delete(instance_uuid)
    # Its host read from the books (the servers API passes the server's), the instance deleted by
    # the host with no read, and nothing more asked by the conductor.
    assert made(placement, before) == {"read": 1, "deleted": 1}
    assert_nothing_left(placement, clients, instance_uuid, moved.request["migration_uuid"])
