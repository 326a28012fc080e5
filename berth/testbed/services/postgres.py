"""A throwaway PostgreSQL server, started as an unprivileged user, for the test suite and for
``--database postgresql`` of the tools.

Usage::

    server = start_postgres()
    server.url                                     # SQLAlchemy URL of an empty database
    url = server.create_database("t_something")   # another one, also empty
    ...
    server.restart()                               # stop (fast) and start again, same port
    server.stop()                                  # also registered with atexit

Besides psycopg 3 it needs only the PostgreSQL server programs (initdb, pg_ctl, postgres).
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import shlex
import shutil
import subprocess
import tempfile
import threading
import time

import psycopg
from psycopg import sql

from berth.testbed.errors import TestbedError
from berth.testbed.logs import tail
from berth.testbed.loopback import free_port

USER = "berth"
DBNAME = "berth"
START_TIMEOUT = 30.0

SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "max_connections": "200",
    # Durability is pointless for a server that is thrown away after the run.
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}


def find_bindir() -> str:
    """Directory holding initdb, pg_ctl and postgres."""
    candidates = []
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        if out.returncode == 0:
            candidates.append(out.stdout.strip())
    # Debian's layout: /usr/lib/postgresql/<major>/bin, newest major first.
    debian = glob.glob("/usr/lib/postgresql/*/bin")
    debian.sort(key=lambda p: _version_key(p.split("/")[-2]), reverse=True)
    candidates += debian
    initdb = shutil.which("initdb")
    if initdb:
        # Resolve symlinks such as /usr/local/bin/initdb -> the real bindir.
        candidates.append(os.path.dirname(os.path.realpath(initdb)))
    for d in candidates:
        # pg_config from a client-only install may point at a bindir
        # without the server programs, hence the check.
        if all(os.access(os.path.join(d, p), os.X_OK) for p in ("initdb", "pg_ctl", "postgres")):
            return d
    raise TestbedError(
        "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found; "
        "install Debian's `postgresql` package (apt-get install postgresql), "
        "or run scripts/ensure-postgres"
    )


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) if x.isdigit() else 0 for x in v.split("."))


def _as_postgres_user() -> list[str]:
    """Command prefix to run server programs; they refuse to run as root."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "postgres"], check=True)
    return ["runuser", "-u", "postgres", "--"]


def _url(port: int, dbname: str) -> str:
    return f"postgresql+psycopg://{USER}@127.0.0.1:{port}/{dbname}"


class PostgresServer:
    def __init__(self) -> None:
        self.bindir = find_bindir()
        self.prefix = _as_postgres_user()
        self.tmpdir = tempfile.mkdtemp(prefix="berth-pg-")
        self.datadir = os.path.join(self.tmpdir, "data")
        self.logfile = os.path.join(self.tmpdir, "postgres.log")
        self.port = 0
        self._stopped = False
        # Restarts asked from several threads at once (the simulator's workers each inject faults)
        # take turns: a stop while another restart is under way finds no server to stop.
        self._restarting = threading.Lock()
        if self.prefix:
            shutil.chown(self.tmpdir, user="postgres", group=pwd.getpwnam("postgres").pw_gid)
        atexit.register(self.stop)

    @property
    def url(self) -> str:
        """The default database, created empty at start."""
        return _url(self.port, DBNAME)

    @property
    def admin_url(self) -> str:
        return _url(self.port, "postgres")

    def _conninfo(self, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user={USER} dbname={dbname}"

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = self.prefix + [os.path.join(self.bindir, args[0]), *args[1:]]
        # cwd: the postgres user may not be allowed into the caller's directory.
        return subprocess.run(cmd, cwd=self.tmpdir, capture_output=True, text=True)

    def _log_tail(self, lines: int = 30) -> str:
        return tail(self.logfile, lines)

    def start(self) -> None:
        r = self._run(
            "initdb", "-D", self.datadir, "-A", "trust", "-U", USER, "--encoding", "UTF8", "--no-locale", "--no-sync"
        )
        if r.returncode != 0:
            raise TestbedError(f"initdb failed:\n{r.stdout}{r.stderr}")

        # A free port may be taken between picking and binding it (e.g. by a
        # parallel test worker), so retry with a fresh one a few times.
        self._start_server(tries=3, pause=0.0, fresh_port=True)
        self._wait_accepting()
        self.create_database(DBNAME)

    def _start_server(self, *, tries: int, pause: float, fresh_port: bool) -> None:
        """``pg_ctl start`` until the server runs, at most ``tries`` times, ``pause`` seconds apart.

        A failed ``pg_ctl start`` does not mean the server is down: its wait may have given up while
        the server was still starting, or another start may have won. A try after that would only
        fail on the server's lock file, so the server's state is read after each failure, and a
        running server ends the tries (``_wait_accepting`` then waits for it to accept)."""
        for attempt in range(1, tries + 1):
            if fresh_port:
                self.port = free_port()
            r = self._pg_ctl_start()
            if r.returncode == 0 or self._running():
                return
            if attempt < tries:
                time.sleep(pause)
        raise TestbedError(f"pg_ctl start failed:\n{r.stdout}{r.stderr}\n--- log tail ---\n{self._log_tail()}")

    def _running(self) -> bool:
        """Whether this data directory's server runs (``pg_ctl status``: 0 running, 3 not)."""
        return self._run("pg_ctl", "-D", self.datadir, "status").returncode == 0

    def _pg_ctl_start(self) -> subprocess.CompletedProcess[str]:
        """Start the postmaster on ``self.port`` with the standard settings."""
        settings = dict(SETTINGS, unix_socket_directories=self.tmpdir, port=str(self.port))
        opts = " ".join(f"-c {k}={shlex.quote(v)}" for k, v in settings.items())
        return self._run(
            "pg_ctl", "-w", "-t", str(int(START_TIMEOUT)), "-D", self.datadir, "-o", opts, "-l", self.logfile, "start"
        )

    def _wait_accepting(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                psycopg.connect(self._conninfo(), connect_timeout=2).close()
                break
            except psycopg.OperationalError as e:
                if time.monotonic() > deadline:
                    raise TestbedError(
                        f"PostgreSQL did not accept connections within {START_TIMEOUT:.0f}s: {e}\n"
                        f"--- log tail ---\n{self._log_tail()}"
                    ) from e
                time.sleep(0.1)

    def create_database(self, name: str) -> str:
        """Create an empty database and return its SQLAlchemy URL."""
        with psycopg.connect(self._conninfo(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return _url(self.port, name)

    def restart(self, mode: str = "fast", down_seconds: float = 0.0) -> float:
        """Stop the server (``pg_ctl stop -m MODE``), stay down ``down_seconds``, start it again.

        Same data directory, port and settings, so existing URLs stay valid; open client
        connections are cut.  Returns how long the server was unreachable, in seconds.
        """
        if self._stopped:
            raise TestbedError("the server was stopped for good")
        with self._restarting:
            began = time.monotonic()
            r = self._run("pg_ctl", "-D", self.datadir, "-m", mode, "-w", "-t", str(int(START_TIMEOUT)), "stop")
            if r.returncode != 0:
                raise TestbedError(f"pg_ctl stop failed:\n{r.stdout}{r.stderr}\n--- log tail ---\n{self._log_tail()}")
            if down_seconds > 0:
                time.sleep(down_seconds)
            # The port was ours a moment ago; something else may still grab it, so retry briefly.
            self._start_server(tries=10, pause=0.5, fresh_port=False)
            self._wait_accepting()
            return time.monotonic() - began

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        atexit.unregister(self.stop)
        if os.path.exists(os.path.join(self.datadir, "postmaster.pid")):
            self._run("pg_ctl", "-D", self.datadir, "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.tmpdir, ignore_errors=True)


def start_postgres() -> PostgresServer:
    server = PostgresServer()
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    return server
