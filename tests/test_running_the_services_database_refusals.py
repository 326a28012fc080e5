"""A database the services cannot use stops them in one line saying which and why, exit status 1:

- ``berth conductor`` given a URL of another kind, a SQLite file in a folder that does not exist, or
  a file that is no database (it printed SQLAlchemy's traceback; ``berth serve`` already said so);
- ``berth serve`` (and ``berth db upgrade``) on a SQLite file whose write lock another process holds
  for longer than the busy timeout (a traceback ending in "database is locked" after 30 s);
- and ``berth conductor``, whose PostgreSQL may be failing over, says at once that it waits for it.

Every command runs as a real ``berth`` process, as an operator would run it."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from livehelpers import run_berth

from berth.testbed.loopback import free_port

pytestmark = pytest.mark.slow


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The single line a failed command printed, exit status 1."""
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("mysql://berth:secret@db/conductors", "Berth keeps its books in SQLite or PostgreSQL, not 'mysql'"),
        ("sqlite:///{tmp}/absent/conductor.sqlite", "no folder {tmp}/absent for the SQLite file"),
        ("sqlite:///{tmp}/notes.txt", "{tmp}/notes.txt is not a SQLite database"),
    ],
)
def test_the_conductors_refuse_a_database_they_cannot_use_in_one_line(tmp_path: Path, url, problem):
    (tmp_path / "notes.txt").write_text("not a database, but long enough to have a header to read\n" * 20)
    done = run_berth(
        "conductor", "--bind", f"127.0.0.1:{free_port()}", "--database", url.format(tmp=tmp_path), cwd=tmp_path
    )
    assert problem.format(tmp=tmp_path) in _one_line(done)
    assert "secret" not in done.stderr


def test_a_sqlite_file_locked_by_another_process_is_refused_in_one_line(tmp_path: Path):
    books = tmp_path / "books.sqlite"
    url = f"sqlite:///{books}"
    assert run_berth("db", "upgrade", "--database", url, cwd=tmp_path).returncode == 0
    holder = sqlite3.connect(books, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")  # a program that keeps a write transaction open
        done = run_berth(
            "serve", "--bind", f"127.0.0.1:{free_port()}", "--database", url, "--workers", "1", cwd=tmp_path
        )
    finally:
        holder.close()
    line = _one_line(done)
    assert f"the SQLite file {books} is locked" in line, line
    assert "let it finish or stop it" in line


def test_a_read_only_sqlite_file_is_refused_in_one_line(tmp_path: Path):
    """SQLite opens a file it may not write read-only and serves its reads; the server used to start,
    say it was ready, and answer every write 500 with a traceback in its log."""
    books = tmp_path / "books.sqlite"
    url = f"sqlite:///{books}"
    assert run_berth("db", "upgrade", "--database", url, cwd=tmp_path).returncode == 0
    books.chmod(0o444)
    # root writes whatever the permissions say: an immutable file (as on a read-only mount) is read-only to it too.
    immutable = os.geteuid() == 0
    if immutable and subprocess.run(["chattr", "+i", str(books)], capture_output=True).returncode != 0:
        pytest.skip("running as root, and this file system cannot make a file immutable")
    try:
        done = run_berth(
            "serve", "--bind", f"127.0.0.1:{free_port()}", "--database", url, "--workers", "1", cwd=tmp_path
        )
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(books)], check=True)
        books.chmod(0o644)
    # Alembic's INFO lines come first: the file was read before its first write was refused.
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    said = [line for line in done.stderr.strip().splitlines() if "INFO alembic." not in line]
    assert len(said) == 1, done.stderr
    assert f"berth: the SQLite file {books} is read-only" in said[0], said


def test_a_conductor_waiting_for_its_database_says_so_at_once(tmp_path: Path):
    """A conductor started while its PostgreSQL does not answer waits for it (a failover takes
    seconds), up to a minute; it used to wait that minute without a word."""
    command = [sys.executable, "-m", "berth.cli.main", "conductor", "--bind", f"127.0.0.1:{free_port()}"]
    command += ["--database", f"postgresql+psycopg://berth@127.0.0.1:{free_port()}/conductors"]
    process = subprocess.Popen(command, cwd=tmp_path, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert "the conductors' database does not answer" in first, first
    assert "Connection refused" in first and "trying again for up to 60 s" in first, first
