"""Live migration through the conductor: the guest and the claims move to another host, a failure
before the guest leaves the source rolls everything back, and a conductor killed after it left is
finished by its successor."""

from __future__ import annotations

import pytest
from conductorhelpers import (
    PLAIN,
    assert_books_agree,
    assert_nothing_left,
    claims_of,
    guests_of,
    only_host_enabled,
    server,
)

from berth.conductor.errors import NoValidHost
from berth.conductor.journal import DONE, FAILED, RUNNING
from berth.conductor.operations.moving import CLEANUP, DROP_SOURCE

pytestmark = pytest.mark.slow


class Killed(BaseException):
    """The conductor's process died here."""


def assert_landed(placement, clients, instance_uuid, host, migration):
    (claim,) = claims_of(clients, instance_uuid)[host]
    assert list(claims_of(clients, instance_uuid)) == [host]
    assert claim.state == "active"
    assert placement.consumer(instance_uuid).allocations == claim.allocations
    assert guests_of(clients, instance_uuid) == {host: claim.claim_id}
    assert_nothing_left(placement, clients, migration)
    return claim


def test_live_migration_moves_the_guest_and_the_claims(conductors, placement, clients, instance_uuid):
    conductor = conductors()
    built = conductor.build(server(instance_uuid, PLAIN))
    moved = conductor.live_migrate(server(instance_uuid, PLAIN))
    assert moved.state == DONE and moved.step == "confirm_dest"
    source, dest = built.selections["host"], moved.selections["dest"]
    assert dest != source and moved.request["source"] == source
    assert source not in [d["host"] for d in moved.selections["destinations"]]
    claim = assert_landed(placement, clients, instance_uuid, dest, moved.request["migration_uuid"])
    assert claim.claim_id == moved.selections["claim_id"]
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


def test_a_live_migration_with_no_other_host_is_refused_by_the_scheduler(conductors, placement, clients, instance_uuid):
    """The scheduler ignores the source, as Nova's does: with no other host enabled there is no
    valid host, said with the scheduler's reason, and the server stays as it was."""
    conductor = conductors()
    built = conductor.build(server(instance_uuid, PLAIN))
    source = built.selections["host"]
    before = placement.consumer(instance_uuid).allocations
    with only_host_enabled(placement, clients, source), pytest.raises(NoValidHost) as refused:
        conductor.live_migrate(server(instance_uuid, PLAIN))
    (operation,) = [o for o in conductor.journal.for_instance(instance_uuid) if o.kind == "live_migrate"]
    assert operation.state == FAILED and not operation.step  # nothing done
    assert [a["host"] for a in refused.value.attempts] == [None]
    migration = operation.request["migration_uuid"]
    # The reason names the instance being moved; its migration (the pick's consumer) only as such.
    assert (
        f"No valid host for instance {instance_uuid} (its migration {migration})" in refused.value.attempts[0]["reason"]
    )
    claim = assert_landed(placement, clients, instance_uuid, source, migration)
    assert claim.claim_id == built.selections["claim_id"]
    assert placement.consumer(instance_uuid).allocations == before
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


def test_a_live_migration_failing_before_the_guest_left_is_rolled_back(conductors, placement, clients, instance_uuid):
    built = conductors().build(server(instance_uuid, PLAIN))
    before = placement.consumer(instance_uuid).allocations

    def fail(operation, step):
        if step == "migrate_out":
            raise RuntimeError("the guest's memory did not converge")

    conductor = conductors(hook=fail)
    with pytest.raises(RuntimeError):
        conductor.live_migrate(server(instance_uuid, PLAIN))
    (operation,) = [o for o in conductor.journal.for_instance(instance_uuid) if o.kind == "live_migrate"]
    assert operation.state == FAILED and "converge" in operation.error
    source = built.selections["host"]
    claim = assert_landed(placement, clients, instance_uuid, source, operation.request["migration_uuid"])
    assert claim.claim_id == built.selections["claim_id"]
    assert placement.consumer(instance_uuid).allocations == before
    assert_books_agree(placement, clients)
    conductor.delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


@pytest.mark.parametrize("step", ["drop_source", "confirm_dest"])
def test_a_live_migration_killed_after_the_guest_left_is_finished(conductors, placement, clients, instance_uuid, step):
    conductors().build(server(instance_uuid, PLAIN))

    def kill(operation, reached):
        if reached == step:
            raise Killed(step)

    with pytest.raises(Killed):
        conductors(hook=kill).live_migrate(server(instance_uuid, PLAIN))
    (dead,) = [o for o in conductors.made[-1].journal.for_instance(instance_uuid) if o.kind == "live_migrate"]
    assert dead.state == RUNNING
    (resumed,) = conductors(dead_after=0).resume()
    assert (resumed.state, resumed.step) == (DONE, "confirm_dest")
    assert_landed(placement, clients, instance_uuid, dead.selections["dest"], dead.request["migration_uuid"])
    assert_books_agree(placement, clients)
    conductors.made[-1].delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


@pytest.mark.parametrize("step", ["claim_dest", "accept_guest", "migrate_out"])
def test_a_live_migration_killed_before_the_guest_left_is_undone(conductors, placement, clients, instance_uuid, step):
    built = conductors().build(server(instance_uuid, PLAIN))
    before = placement.consumer(instance_uuid).allocations

    def kill(operation, reached):
        if reached == step:
            raise Killed(step)

    with pytest.raises(Killed):
        conductors(hook=kill).live_migrate(server(instance_uuid, PLAIN))
    (resumed,) = conductors(dead_after=0).resume()
    assert resumed.state == "rolled_back"
    claim = assert_landed(
        placement, clients, instance_uuid, built.selections["host"], resumed.request["migration_uuid"]
    )
    assert claim.claim_id == built.selections["claim_id"]
    assert placement.consumer(instance_uuid).allocations == before
    assert_books_agree(placement, clients)
    conductors.made[-1].delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)


class AgentLost(Exception):
    """The source's agent did not answer (it was killed) at this step."""


def test_a_live_migration_whose_source_went_down_after_the_guest_left_is_finished_without_it(
    conductors, placement, clients, cloud, instance_uuid
):
    """The source dies once the guest has left it: the migration cannot drop the source's side,
    and waits, running, while the host is only silent (the server busy though it runs on the
    destination). Once the host is seen down the books let go of the source's side and the
    migration ends; the source's agent drops its claim when it is back."""
    down = set()
    built = conductors(hosts_down=down).build(server(instance_uuid, PLAIN))
    source = built.selections["host"]

    def source_dies(operation, step):
        if step == "drop_source":
            cloud[source].stop()
            raise AgentLost(step)

    with pytest.raises(AgentLost):
        conductors(hook=source_dies, hosts_down=down).live_migrate(server(instance_uuid, PLAIN))
    try:
        journal = conductors.made[-1].journal
        (moved,) = journal.find(instance_uuid=instance_uuid, kind="live_migrate")
        dest, migration = moved.selections["dest"], moved.request["migration_uuid"]
        assert moved.state == RUNNING and moved.step == "migrate_out"
        conductors(hosts_down=down).resume()
        assert journal.get(moved.id).state == RUNNING
        down.add(source)
        conductors(hosts_down=down).resume()
        assert journal.get(moved.id).state == DONE
        (claim,) = clients[dest].claims_for_instance(instance_uuid)
        assert claim.state == "active"
        assert placement.consumer(instance_uuid).allocations == claim.allocations
        assert placement.consumer(migration).allocations == {}
        (clean_up,) = journal.find(instance_uuid=instance_uuid, kind=CLEANUP)
        assert clean_up.state == RUNNING and clean_up.request["side"] == DROP_SOURCE
    finally:
        cloud[source].start()
        clients[source] = cloud[source].client
    down.discard(source)
    conductors(hosts_down=down).resume()
    assert journal.get(clean_up.id).state == DONE
    assert_landed(placement, clients, instance_uuid, dest, migration)
    conductors.made[-1].delete(instance_uuid)
    assert_nothing_left(placement, clients, instance_uuid)
