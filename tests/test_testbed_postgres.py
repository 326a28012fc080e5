"""The throwaway PostgreSQL of the tests and tools (berth.testbed.postgres): a restart, as the
simulator's fault does it, ends with the server up and no error, also when its own start is beaten."""

from __future__ import annotations

import os
import threading
import time

import psycopg
import pytest

from berth.testbed.errors import TestbedError
from berth.testbed.postgres import PostgresServer, start_postgres

pytestmark = pytest.mark.slow


@pytest.fixture
def server():
    started = start_postgres()
    yield started
    started.stop()


def _answers(server: PostgresServer) -> bool:
    with psycopg.connect(f"host=127.0.0.1 port={server.port} user=berth dbname=berth", connect_timeout=5) as conn:
        return conn.execute("SELECT 1").fetchone() == (1,)


def test_a_restart_brings_the_server_back(server):
    server.restart(mode="fast", down_seconds=0.2)
    assert _answers(server)


def test_a_restart_whose_start_finds_the_server_up_is_no_error(server):
    # The restart's own `pg_ctl start` fails while the server is up: as when its wait gives up on a
    # server still starting, here because another start came first. Trying again only fails on the
    # server's lock file; the server is up, and the restart must say so.
    outcome: dict[str, object] = {}

    def restart() -> None:
        try:
            outcome["down"] = server.restart(mode="fast", down_seconds=5.0)
        except TestbedError as e:
            outcome["error"] = e

    pid_file = os.path.join(server.datadir, "postmaster.pid")
    thread = threading.Thread(target=restart)
    thread.start()
    deadline = time.monotonic() + 30
    while os.path.exists(pid_file):
        assert time.monotonic() < deadline, "the server did not stop"
        time.sleep(0.02)
    # Down: started again from elsewhere, with the same settings, within the restart's 5 s down
    # (a margin for a loaded machine, not a measurement).
    assert server._pg_ctl_start().returncode == 0
    thread.join(timeout=120)
    assert not thread.is_alive()
    assert "error" not in outcome, outcome.get("error")
    assert _answers(server)
