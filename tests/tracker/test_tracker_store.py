"""The claim store: its reads come from memory, and memory holds exactly what the file holds."""

from __future__ import annotations

import sqlite3

import pytest
from trackerhelpers import flavor, new_uuid

from berth.domain.host.records import ACTIVE, INCOMING, OUTGOING, ClaimRecord
from berth.tracker.store import ClaimStore, StoreError


def claim(host="host-1", *, instance=None, state=ACTIVE, migration=None, pending=None, created=None) -> ClaimRecord:
    record = ClaimRecord.new(
        host=host,
        instance_uuid=instance or new_uuid(),
        consumer_uuid=migration if state == OUTGOING else (instance or new_uuid()),
        kind="instance",
        state=state,
        project_id="project-1",
        user_id="user-1",
        flavor=flavor(2, 1024, 10),
        allocations={"rp-1": {"VCPU": 2, "MEMORY_MB": 1024}},
        shared_allocations={"pool-1": {"DISK_GB": 10}},
        migration_uuid=migration,
        pending_op=pending,
    )
    return record if created is None else record.evolve(created_at=created)


def file_claims(path) -> dict[str, str]:
    """The claims in the file itself, claim id -> state, as another reader of the file sees them."""
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT claim_id, state FROM claims").fetchall())


@pytest.fixture
def store(tmp_path):
    made = ClaimStore(str(tmp_path / "claims.sqlite"))
    yield made
    made.close()


def test_every_read_answers_what_was_written_oldest_first(store):
    move = new_uuid()
    later = claim(instance="i-1", created=2000.0)
    earlier = claim(instance="i-1", state=INCOMING, migration=move, created=1000.0)
    other_host = claim("host-2", state=OUTGOING, migration=move, pending="confirm", created=1500.0)
    for record in (later, earlier, other_host):
        store.add(record)
    assert store.all() == [earlier, other_host, later]
    assert store.get(later.claim_id) == later
    assert store.get(new_uuid()) is None
    assert store.for_instance("i-1") == [earlier, later]
    assert store.for_host("host-2") == [other_host]
    assert store.for_migration(move) == [earlier, other_host]
    assert store.pending() == [other_host]


def test_a_store_opened_again_reads_what_the_first_one_wrote(store):
    kept, changed, gone = claim(created=1.0), claim(created=2.0), claim(created=3.0)
    store.write(add=[kept, changed, gone])
    updated = store.update(changed, state=INCOMING, migration_uuid=new_uuid())
    store.delete(gone.claim_id)
    again = ClaimStore(store.path)
    try:
        assert again.all() == store.all() == [kept, updated]
        assert again.get(updated.claim_id).shared_allocations == {"pool-1": {"DISK_GB": 10}}
    finally:
        again.close()


def test_a_write_refused_changes_neither_the_file_nor_the_reads(store):
    first = claim()
    store.add(first)
    added, missing = claim(), claim()
    with pytest.raises(StoreError, match=missing.claim_id):
        store.write(add=[added], replace=[missing], delete=[first.claim_id])
    assert store.all() == [first]
    assert file_claims(store.path) == {first.claim_id: ACTIVE}


def test_a_write_the_database_refuses_changes_neither_the_file_nor_the_reads(store):
    first = claim()
    store.add(first)
    with pytest.raises(Exception, match="UNIQUE"):
        store.write(add=[claim(), first])  # the first added again: its key is taken
    assert store.all() == [first]
    assert file_claims(store.path) == {first.claim_id: ACTIVE}
