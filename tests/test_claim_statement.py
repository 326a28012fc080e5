"""PostgreSQL: a pick's consumer written by the statement that takes its capacity, and when it is not."""

import pytest
import sqlalchemy as sa
from apihelpers import Api, new_uuid

from berth.api.app import PlacementApp
from berth.domain.errors import ConcurrentUpdate, Conflict
from berth.store.placement.allocations import ConsumerAllocations, replace_allocations
from berth.store.placement.taking import ConsumerNotWritten


@pytest.fixture
def host(db):
    if db.is_sqlite:
        pytest.skip("the consumer goes with its allocations in one statement on PostgreSQL alone")
    api = Api(PlacementApp(db))
    uuid = api.create_provider("host", inventory={"VCPU": 4, "MEMORY_MB": 4096})
    # Owners of an earlier consumer, which exist from then on.
    api.allocate(new_uuid(), {uuid: {"VCPU": 1}}, project="p", user="u")
    return api, uuid


def _claim(db, consumer, host_uuid, vcpu, *, project="p", user="u", counted_by_writer=False):
    request = ConsumerAllocations(
        consumer,
        {host_uuid: {"VCPU": vcpu, "MEMORY_MB": 512}},
        project_id=project,
        user_id=user,
        consumer_generation=None,
        consumer_type="INSTANCE",
    )
    with db.engine.connect() as conn, conn.begin():
        replace_allocations(conn, [request], new_consumers=True, consumer_counted_by_writer=counted_by_writer)


def _held(db, consumer):
    with db.engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT c.generation, a.used FROM consumers c JOIN allocations a ON a.consumer_id = c.uuid "
                "WHERE c.uuid = :uuid ORDER BY a.resource_class_id"
            ),
            {"uuid": consumer},
        ).all()
    return [tuple(row) for row in rows]


def _usage(api, uuid):
    return api.get(f"/resource_providers/{uuid}/usages").json_body["usages"]


def test_the_consumer_of_a_project_without_limits_is_written_with_its_allocations(db, host):
    api, uuid = host
    consumer = new_uuid()
    _claim(db, consumer, uuid, 2)
    assert _held(db, consumer) == [(1, 2), (1, 512)]
    assert _usage(api, uuid) == {"VCPU": 3, "MEMORY_MB": 512}


@pytest.mark.parametrize("counted_by_writer", [False, True])
def test_a_claim_without_room_is_refused_and_writes_no_consumer(db, host, counted_by_writer):
    api, uuid = host
    consumer = new_uuid()
    with pytest.raises(Conflict, match="would exceed the capacity"):
        _claim(db, consumer, uuid, 4, counted_by_writer=counted_by_writer)
    assert _held(db, consumer) == []
    assert _usage(api, uuid) == {"VCPU": 1, "MEMORY_MB": 0}


def test_a_consumer_whose_owners_do_not_exist_yet_is_not_written(db, host):
    api, uuid = host
    consumer = new_uuid()
    with pytest.raises(ConsumerNotWritten) as raised:
        _claim(db, consumer, uuid, 1, project="new-project")
    assert not raised.value.counted
    assert _held(db, consumer) == [] and _usage(api, uuid) == {"VCPU": 1, "MEMORY_MB": 0}


@pytest.mark.parametrize("limits", ["/berth/quotas/p", "/berth/quotas/p/users/u"])
def test_the_consumer_of_a_limited_project_is_written_only_by_a_writer_that_counts_it(db, host, limits):
    """The counters' triggers would count its allocations twice if its row came in the same
    statement: such a claim is refused, to be written the usual way."""
    api, uuid = host
    api.put(limits, {"limits": {"VCPU": 10}})
    consumer = new_uuid()
    with pytest.raises(ConsumerNotWritten) as raised:
        _claim(db, consumer, uuid, 1)
    assert raised.value.counted
    assert _held(db, consumer) == [] and _usage(api, uuid) == {"VCPU": 1, "MEMORY_MB": 0}


def test_a_consumer_that_exists_already_is_a_concurrent_update(db, host):
    _, uuid = host
    consumer = new_uuid()
    _claim(db, consumer, uuid, 1)
    with pytest.raises(ConcurrentUpdate):
        _claim(db, consumer, uuid, 1)
    assert _held(db, consumer) == [(1, 1), (1, 512)]
