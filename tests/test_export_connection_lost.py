"""``berth export`` from PostgreSQL whose connection is lost under it (the server stopped, restarted
or failed over meanwhile): one line saying so and what to do, not a traceback; a snapshot file is
written whole or not at all, so last night's backup of that name is as it was.

A real ``berth export`` on a PostgreSQL server of the test's own, stopped while the export runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from dbhelpers import database_with_hosts

from berth.testbed.services.postgres import PostgresServer, start_postgres

pytestmark = pytest.mark.slow


def _export(url: str, file: str, cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "berth.cli.main", "export", file, "--database", url],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _stop(postgres: PostgresServer) -> None:
    """Stop the server as an operator's restart does: every session is ended, the export's too."""
    stopped = postgres._run("pg_ctl", "-D", postgres.datadir, "-m", "fast", "-w", "stop")
    assert stopped.returncode == 0, stopped.stderr


def _one_line(stderr: bytes) -> str:
    said = stderr.decode().strip()
    assert "Traceback" not in said, said
    assert len(said.splitlines()) == 1, said
    return said


def test_an_export_to_standard_output_whose_connection_is_lost_says_so_in_one_line(tmp_path):
    postgres = start_postgres()
    try:
        url = database_with_hosts(postgres.create_database("books"), 10_000)
        export = _export(url, "-", tmp_path)
        try:
            assert export.stdout is not None
            first = json.loads(export.stdout.readline())
            assert first["format"] == "berth-books"
            # The export now waits for the pipe to be read (the books are megabytes): it is midway,
            # with most of the books still to be read from the server.
            _stop(postgres)
            rest, stderr = export.communicate(timeout=120)
        finally:
            if export.poll() is None:
                export.kill()
                export.wait()

        assert export.returncode == 1
        said = _one_line(stderr)
        assert said.startswith("Error: the connection to the database at postgresql+psycopg://")
        assert "was lost during the export (" in said
        assert said.endswith(
            "what was written to standard output is incomplete: discard it, and export again once the database answers"
        ), said
        assert len(rest.splitlines()) < 3 * 10_000  # cut short, not the whole books
    finally:
        postgres.stop()


def test_an_export_to_a_file_whose_connection_is_lost_keeps_the_file_there_before(tmp_path):
    postgres = start_postgres()
    try:
        url = database_with_hosts(postgres.create_database("books"), 3)
        backup = tmp_path / "books.jsonl"
        backup.write_bytes(b"last night's backup\n")
        # A writer holds the allocations table: the export, counting the books in its transaction,
        # waits for it when the server is stopped.
        conninfo = url.replace("postgresql+psycopg://", "postgresql://")
        holder = psycopg.connect(conninfo)
        holder.execute("LOCK TABLE allocations IN ACCESS EXCLUSIVE MODE")
        # Another session: one in a transaction sees the sessions as they were when it began.
        watcher = psycopg.connect(conninfo, autocommit=True)
        export = _export(url, "books.jsonl", tmp_path)
        try:
            for _ in range(2400):  # a bound, not a measure: the export waits at once
                if _waits_for_a_lock(watcher):
                    break
                assert export.poll() is None, export.communicate()
                time.sleep(0.05)
            else:
                pytest.fail("the export never waited for the allocations table")
            _stop(postgres)
            _out, stderr = export.communicate(timeout=120)
        finally:
            if export.poll() is None:
                export.kill()
                export.wait()
            holder.close()
            watcher.close()

        assert export.returncode == 1
        said = _one_line(stderr)
        assert said.startswith("Error: the connection to the database at postgresql+psycopg://")
        assert said.endswith("books.jsonl is as it was before: export again once the database answers"), said
        assert backup.read_bytes() == b"last night's backup\n"
        assert os.listdir(tmp_path) == ["books.jsonl"]  # no partial file left beside it
    finally:
        postgres.stop()


def _waits_for_a_lock(watcher: psycopg.Connection) -> bool:
    """Whether a session of the database waits for a lock (the export, for the holder's)."""
    row = watcher.execute(
        "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    ).fetchone()
    return row is not None and row[0] > 0
