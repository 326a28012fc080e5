"""The throwaway PostgreSQL of the tests and tools (berth.testbed.services.postgres): a restart, as the
simulator's fault does it, ends with the server up and no error, also when its own start is beaten."""

from __future__ import annotations

import os
import threading
import time

import psycopg
import pytest

from berth.testbed.errors import TestbedError
from berth.testbed.services.postgres import PostgresServer, start_postgres

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


def test_restarts_asked_at_once_take_turns_and_leave_the_server_up(server):
    # The simulator's workers inject faults independently: a restart may be asked while another's
    # server is down, between its stop and its start.
    errors: list[BaseException] = []

    def restart(delay: float) -> None:
        time.sleep(delay)
        try:
            server.restart(mode="fast", down_seconds=0.6)
        except BaseException as error:  # noqa: BLE001 - the test reports any failure
            errors.append(error)

    threads = [threading.Thread(target=restart, args=(delay,)) for delay in (0.0, 0.4, 0.8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert _answers(server)


def test_a_restart_whose_start_finds_the_server_up_is_no_error(server, monkeypatch):
    # The restart's own `pg_ctl start` fails while the server is up: as when its wait gives up on a
    # server still starting, here because another start came first. Trying again only fails on the
    # server's lock file; the server is up, and the restart must say so.
    outcome: dict[str, object] = {}
    stopped = threading.Event()
    run = server._run

    def observed_run(*args, **kwargs):
        # Told when the restart's `pg_ctl stop` has returned: a server started before that (as soon
        # as its lock file went) is one that `pg_ctl stop -w` sees come back, and then fails on.
        result = run(*args, **kwargs)
        if "stop" in args:
            stopped.set()
        return result

    monkeypatch.setattr(server, "_run", observed_run)

    def restart() -> None:
        try:
            outcome["down"] = server.restart(mode="fast", down_seconds=5.0)
        except TestbedError as e:
            outcome["error"] = e

    thread = threading.Thread(target=restart)
    thread.start()
    assert stopped.wait(30), "the server did not stop"
    assert not os.path.exists(os.path.join(server.datadir, "postmaster.pid"))
    # Down: started again from elsewhere, with the same settings, within the restart's 5 s down
    # (a margin for a loaded machine, not a measurement).
    assert server._pg_ctl_start().returncode == 0
    thread.join(timeout=120)
    assert not thread.is_alive()
    assert "error" not in outcome, outcome.get("error")
    assert _answers(server)
