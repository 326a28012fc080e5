"""An operation's row is written only by the conductor it names: one taken over while its owner was
silent but alive (a database failing over delays its heartbeat past ``dead_after``) stops its old
owner at its next write, and nothing that owner writes lands."""

from __future__ import annotations

import uuid

import pytest

from berth.conductor.journal import DONE, FAILED, RUNNING, Journal, TakenOver


@pytest.fixture
def journal(tmp_path):
    made = Journal(f"sqlite:///{tmp_path / 'journal.sqlite'}")
    yield made
    made.close()


def test_an_owner_whose_operation_was_taken_over_writes_nothing_more(journal):
    mine = journal.start("resize", str(uuid.uuid4()), {}, owner="alive-but-silent")
    (silent,) = journal.silent("successor", 0.0)
    taken = journal.take_over(silent, "successor", 0.0)
    assert taken is not None and taken.owner == "successor"

    mine.step, mine.state = "claim_dest", DONE
    with pytest.raises(TakenOver):
        journal.save(mine)
    with pytest.raises(TakenOver):
        journal.abandon(mine, "undoing it failed")
    row = journal.get(mine.id)
    assert row is not None
    assert (row.owner, row.state, row.step, row.error) == ("successor", RUNNING, "", None)

    taken.state, taken.error = FAILED, "undone by its successor"
    journal.save(taken)
    row = journal.get(mine.id)
    assert row is not None and (row.owner, row.state) == ("successor", FAILED)


def test_the_owner_writes_as_before(journal):
    mine = journal.start("build", str(uuid.uuid4()), {}, owner="me")
    mine.step = "schedule"
    journal.save(mine)
    journal.abandon(mine, "a host away")
    row = journal.get(mine.id)
    assert row is not None and (row.owner, row.step, row.error) == ("", "schedule", "a host away")
    # Nobody's now: any conductor's resume takes it.
    assert journal.take_over(row, "next", 0.0) is not None
