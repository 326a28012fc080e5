"""How many times each operation writes its journal row: a step whose record would change nothing a
resume does, and the last step before the end, are written with the operation's next write, so
that each write costs a transaction only where a conductor killed after it must find it. The
operations still end with every step listed (``steps_done``), as they did when each was written."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa
from conductorhelpers import BIGGER, PLAIN, assert_books_agree, assert_nothing_left, server

from berth.clients.placement import PlacementClient
from berth.conductor.conductor import Conductor
from berth.conductor.journal import DONE, Journal
from berth.conductor.runner import STEPS_DONE, ConductorConfig
from berth.scheduler.settings import SelectionSettings

pytestmark = pytest.mark.slow


WRITES = ("INSERT INTO CONDUCTOR_OPERATIONS", "UPDATE CONDUCTOR_OPERATIONS")


class RowWrites:
    """The statements writing a journal row (its INSERT, then each UPDATE naming its id), per
    operation id, as SQLite runs them: the journal sends its writes straight to the driver, where
    SQLAlchemy's events do not see them."""

    def __init__(self, engine):
        self.statements: list[str] = []

        def seen(statement):
            if statement.lstrip().upper().startswith(WRITES):
                self.statements.append(statement)

        def checkout(dbapi_connection, record, proxy):
            dbapi_connection.set_trace_callback(seen)

        sa.event.listen(engine, "checkout", checkout)

    def of(self, operation_id):
        return sum(1 for statement in self.statements if operation_id in statement)


def test_each_operation_writes_its_row_only_where_a_resume_needs_it(conductors, placement, clients, instance_uuid):
    conductor = conductors()
    writes = RowWrites(conductor.journal.engine)

    built = conductor.build(server(instance_uuid, PLAIN))
    # The start, the destinations (the undo's host), the guest started (finished from there), the end.
    assert built.state == DONE
    assert built.selections[STEPS_DONE] == ["schedule", "claim", "spawn", "confirm"]
    assert writes.of(built.id) == 4
    assert conductor.journal.get(built.id).selections[STEPS_DONE] == built.selections[STEPS_DONE]

    moved = conductor.resize(server(instance_uuid, PLAIN), BIGGER)
    # The start, the destinations, the destination's claim, the end (the guest started with it).
    assert moved.state == DONE
    assert moved.selections[STEPS_DONE] == [
        "schedule",
        "move_out",
        "release_reservation",
        "claim_dest",
        "spawn_dest",
    ]
    assert writes.of(moved.id) == 4

    confirmed = conductor.confirm_resize(moved.id)
    steps = confirmed.selections[STEPS_DONE]
    # Each step but the last before the next starts (a resume goes on from it), the last with the end.
    assert confirmed.state == DONE and steps[-1] in ("confirm_dest", "confirm_source")
    assert writes.of(confirmed.id) == 1 + len(steps)

    soft = conductor.soft_delete(instance_uuid)
    assert soft.state == DONE and writes.of(soft.id) == 2
    restored = conductor.restore(instance_uuid)
    assert restored.state == DONE and writes.of(restored.id) == 2

    rebuilt = conductor.rebuild(instance_uuid)
    # The check changes nothing and the spawn goes with the end: the start, the destroy, the end.
    assert rebuilt.selections[STEPS_DONE] == ["check", "destroy", "spawn"]
    assert writes.of(rebuilt.id) == 3

    deleted = conductor.delete(instance_uuid)
    # A resumed delete runs every step again: the start and the end.
    assert deleted.state == DONE
    assert deleted.selections[STEPS_DONE] == ["destroy", "release_host", "release_allocations"]
    assert writes.of(deleted.id) == 2
    assert conductor.journal.get(deleted.id).step == "release_allocations"
    assert_books_agree(placement, clients)
    assert_nothing_left(placement, clients, instance_uuid, moved.request["migration_uuid"])


def test_a_resume_while_every_owner_beats_writes_nothing(tmp_path):
    """Housekeeping runs resume() every heartbeat: it reads which operations' owners are silent and
    tries to take over those alone, not every running operation of a live conductor."""
    journal = Journal(f"sqlite:///{tmp_path / 'journal.sqlite'}")
    try:
        alive = journal.start("build", str(uuid.uuid4()), {}, owner="alive")
        mine = journal.start("build", str(uuid.uuid4()), {}, owner="me")
        left = journal.start("build", str(uuid.uuid4()), {}, owner="gone")
        journal.abandon(left, "resume failed")
        writes = RowWrites(journal.engine)
        # Silent for a minute: only the abandoned one (never the asker's own).
        assert [o.id for o in journal.silent("me", 60.0)] == [left.id]
        # With no grace at all, every other owner's.
        assert [o.id for o in journal.silent("me", 0.0)] == [alive.id, left.id]
        conductor = Conductor(
            PlacementClient("http://127.0.0.1:9"),
            journal,
            agents={},
            settings=SelectionSettings(enabled_filters=[]),
            config=ConductorConfig(dead_after=60.0),
            owner="me",
        )
        # The abandoned build is taken over (and undone: with no agent and no service to ask, its
        # resume fails and it is left to nobody again); the live one is not even tried.
        conductor.resume()
        assert writes.of(alive.id) == 0 and writes.of(mine.id) == 0
        assert writes.of(left.id) >= 1
        assert journal.get(alive.id).owner == "alive"
    finally:
        journal.close()
