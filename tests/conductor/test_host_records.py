"""The hosts the conductors know (``berth.conductor.records.hosts``): which are down, as the
scheduler reads them every second, is what every host's own row says, on both databases (the
database's clock decides how long a host has been silent)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from berth.conductor.records import tables
from berth.conductor.records.hosts import Hosts

pytestmark = pytest.mark.slow


@pytest.fixture
def journal(journal_on_each_database):
    return journal_on_each_database  # its tables made with the journal's


def test_the_hosts_down_are_those_whose_rows_say_so(journal):
    hosts = Hosts(journal.engine, down_after=30.0)
    for name in ("beating", "silent", "just-in-time"):
        hosts.register(name, f"http://{name}", None, None, "admin", admin=True)
    assert hosts.down() == frozenset()
    with journal.engine.begin() as conn:
        for name, silent in (("silent", 120.0), ("just-in-time", 20.0)):
            conn.execute(
                tables.hosts.update()
                .where(tables.hosts.c.name == name)
                .values(heartbeat=tables.hosts.c.heartbeat - sa.literal(silent))
            )
    assert hosts.down() == frozenset({"silent"})
    assert hosts.down() == frozenset(h.name for h in hosts.all() if not h.up)
