"""Leases, the lease reaper and the conductors' heartbeats run on the database's clock: a process
whose clock is an hour ahead (Debian's ``faketime``) against a real PostgreSQL neither releases a
lease early, nor sets one that lasts an hour too long, nor takes over a live conductor's work."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from berth.conductor.journal import Journal
from berth.store.database import Database
from berth.store.leases import ledger
from berth.store.migrate import upgrade

pytestmark = pytest.mark.slow

AHEAD = 3600.0


@pytest.fixture(scope="module")
def faketime():
    path = shutil.which("faketime")
    if path is None:
        pytest.skip("faketime not found; install Debian's faketime package (scripts/ensure-patroni does)")
    return path


@pytest.fixture(scope="module")
def url(postgres_server):
    url = postgres_server.create_database(f"clock_{uuid.uuid4().hex[:10]}")
    db = Database(url)
    upgrade(db)
    db.dispose()
    return url


def run_ahead(faketime, code: str, *args: str) -> dict:
    """Run ``code`` in a Python whose clock is an hour ahead; what it printed as JSON, which must
    include its own ``time.time()`` (checked: the clock is really ahead)."""
    done = subprocess.run(
        [faketime, "-f", f"+{int(AHEAD)}s", sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["clock"] - time.time() > AHEAD - 60, "faketime did not move the clock"
    return answer


REAP = """
import json, sys, time
from berth.store.database import Database
from berth.store.leases.reaper import LeaseReaper
from berth.store.leases import ledger
db = Database(sys.argv[1])
released = LeaseReaper(db).reap()
expires_at = db.write(lambda conn: ledger.set_lease(conn, sys.argv[2], 60))
print(json.dumps({"clock": time.time(), "released": released}))
"""


def test_a_server_whose_clock_runs_ahead_neither_ends_a_lease_early_nor_sets_one_late(faketime, url):
    db = Database(url)
    try:
        kept, new = str(uuid.uuid4()), str(uuid.uuid4())
        db.write(lambda conn: ledger.set_lease(conn, kept, 600))
        answer = run_ahead(faketime, REAP, url, new)
        assert kept not in answer["released"]
        assert db.read(lambda conn: ledger.get_lease(conn, kept)) is not None
        # The lease it set lasts its 60 s from the database's now, not from an hour ahead.
        lease = db.read(lambda conn: ledger.get_lease(conn, new))
        now = db.read(ledger.database_now)
        assert 0 < (lease.expires_at - now).total_seconds() <= 60
    finally:
        db.dispose()


TAKE_OVER = """
import json, sys, time
from berth.conductor.journal import Journal
journal = Journal(sys.argv[1])
operation = journal.get(sys.argv[2])
taken = journal.take_over(operation, "ahead", 60.0)
dead = journal.take_over(operation, "ahead", 0.0)
print(json.dumps({"clock": time.time(), "taken_alive": taken is not None, "taken_dead": dead is not None}))
"""


def test_a_conductor_whose_clock_runs_ahead_does_not_take_over_a_live_one(faketime, url):
    journal = Journal(url)
    try:
        operation = journal.start("build", str(uuid.uuid4()), {}, owner="alive")
        answer = run_ahead(faketime, TAKE_OVER, url, operation.id)
        # Beaten a moment ago by the database's clock: alive for a 60 s limit; with no limit at all,
        # taken (so the process could take it over when it should).
        assert answer["taken_alive"] is False
        assert answer["taken_dead"] is True
        assert journal.get(operation.id).owner == "ahead"
    finally:
        journal.close()
