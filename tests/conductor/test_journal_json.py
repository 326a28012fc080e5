"""The journal's JSON columns on both databases: what a step writes is read back as it was, and is
written as compact JSON text (orjson, the encoder the journal's engine is given)."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from berth.conductor.journal import operations

pytestmark = pytest.mark.slow


@pytest.fixture
def journal(journal_on_each_database):
    return journal_on_each_database


def test_an_operations_json_is_read_back_as_written(journal):
    request = {"flavor": {"name": "m1.small", "extra_specs": {"hw:numa_nodes": "2"}}, "count": 3, "ratio": 1.5}
    operation = journal.start("build", str(uuid.uuid4()), request, owner="me")
    operation.step = "claim"
    operation.selections = {"hosts": ["a", "b"], "claims": {"a": {"VCPU": 2}}, "note": "ünïcode", "none": None}
    operation.attempts = [{"host": "c", "reason": "no room"}]
    journal.save(operation)

    row = journal.get(operation.id)
    assert row is not None
    assert (row.request, row.selections, row.attempts) == (request, operation.selections, operation.attempts)
    with journal.engine.connect() as conn:
        text = conn.execute(
            sa.select(sa.cast(operations.c.attempts, sa.Text)).where(operations.c.id == operation.id)
        ).scalar_one()
    assert text == '[{"host":"c","reason":"no room"}]'
