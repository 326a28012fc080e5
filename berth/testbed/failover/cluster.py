"""A throwaway Patroni cluster on loopback: one etcd member and N PostgreSQL nodes with synchronous
replication, for the failover test and ``berth stress --fault failover``.

Usage::

    cluster = start_cluster(nodes=2)
    cluster.url                  # SQLAlchemy URL naming every node, target_session_attrs=read-write
    cluster.leader()             # name of the node Patroni made primary
    cluster.crash_leader()       # kill -9 of the leader's PostgreSQL (postmaster and backends)
    cluster.wait_leader(other_than="node0")
    cluster.stop()               # also registered with atexit

Patroni (``patroni``) and etcd (``etcd``) are Debian's packages (scripts/ensure-patroni).  Everything
runs as the ``postgres`` user when started as root (PostgreSQL refuses root), listens on free ports of
127.0.0.1, and lives in one temporary folder removed at the end.

The settings make a crash fail over within seconds: ``primary_start_timeout: 0`` makes the leader's
Patroni give up its leader key as soon as it finds its PostgreSQL dead (instead of restarting it in
place), and ``loop_wait: 1`` lets the synchronous standby take the key within a second or two.
``synchronous_mode: true`` makes PostgreSQL acknowledge a commit only once the synchronous standby
has it, and Patroni promote only that standby, so no acknowledged commit is lost.  ``fsync`` is off:
a crash here kills processes, never the operating system, whose page cache keeps what was written.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field

import psycopg
import yaml
from psycopg import sql

from berth.testbed import processes
from berth.testbed.errors import TestbedError
from berth.testbed.logs import tail
from berth.testbed.loopback import free_port
from berth.testbed.services.postgres import DBNAME, USER, _as_postgres_user, find_bindir

START_TIMEOUT = 90.0
STOP_GRACE = 10.0


def find_programs() -> tuple[str, str]:
    """The paths of ``patroni`` and ``etcd``; a :class:`TestbedError` naming what is missing."""
    found = {name: shutil.which(name) for name in ("patroni", "etcd")}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise TestbedError(
            f"{' and '.join(missing)} not found; install Debian's `patroni` and `etcd-server` packages "
            "(apt-get install patroni etcd-server), or run scripts/ensure-patroni"
        )
    return found["patroni"] or "", found["etcd"] or ""


@dataclass
class Node:
    name: str
    folder: str
    pg_port: int
    api_port: int
    process: subprocess.Popen[bytes] | None = None
    crashes: list[int] = field(default_factory=list)

    @property
    def datadir(self) -> str:
        return os.path.join(self.folder, "data")

    @property
    def logpath(self) -> str:
        return os.path.join(self.folder, "patroni.log")

    def postmaster_pid(self) -> int | None:
        try:
            with open(os.path.join(self.datadir, "postmaster.pid")) as f:
                pid = int(f.readline().strip())
        except (OSError, ValueError):
            return None
        return pid if os.path.exists(f"/proc/{pid}") else None

    def status(self) -> dict[str, object] | None:
        """Patroni's REST answer about this node (role, state, timeline), or None."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.api_port}/patroni", timeout=2) as r:
                answer: dict[str, object] = json.loads(r.read())
                return answer
        except urllib.error.HTTPError as e:  # 503 when not the primary: the body still says why
            with contextlib.suppress(ValueError):
                answer = json.loads(e.read())
                return answer
            return None
        except (OSError, ValueError):
            return None


class PatroniCluster:
    def __init__(self, nodes: int = 2) -> None:
        if nodes < 2:
            raise TestbedError("a failover needs at least two PostgreSQL nodes")
        self.patroni, self.etcd = find_programs()
        self.bindir = find_bindir()
        self.prefix = _as_postgres_user()
        self.tmpdir = tempfile.mkdtemp(prefix="berth-patroni-")
        self.scope = f"berth-{os.path.basename(self.tmpdir)[-8:]}"
        self.etcd_port = 0
        self.etcd_process: subprocess.Popen[bytes] | None = None
        self.nodes = [
            Node(f"node{i}", os.path.join(self.tmpdir, f"node{i}"), free_port(), free_port()) for i in range(nodes)
        ]
        self._stopped = False
        self.crashed_at = 0.0  # time.time() of the last crash_leader's SIGKILLs
        if self.prefix:
            shutil.chown(self.tmpdir, user="postgres", group=pwd.getpwnam("postgres").pw_gid)
        atexit.register(self.stop)

    # -- addresses

    @property
    def url(self) -> str:
        """Every node in one libpq URL; libpq tries them in turn and keeps the one taking writes."""
        return self.url_of(DBNAME)

    def url_of(self, dbname: str) -> str:
        """The multi-host URL of the database ``dbname``."""
        hosts = "&".join(f"host=127.0.0.1:{n.pg_port}" for n in self.nodes)
        return f"postgresql+psycopg://{USER}@/{dbname}?{hosts}&target_session_attrs=read-write&connect_timeout=2"

    def create_database(self, name: str) -> str:
        """Create an empty database on the primary (the standbys replicate it); its multi-host URL."""
        leader = self.wait_leader(timeout=START_TIMEOUT)
        with psycopg.connect(self.conninfo(leader, "postgres"), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url_of(name)

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    # -- start

    def _spawn(self, command: list[str], logpath: str) -> subprocess.Popen[bytes]:
        with open(logpath, "ab") as log:
            # cwd: the postgres user may not be allowed into the caller's directory.
            return subprocess.Popen(
                self.prefix + command,
                cwd=self.tmpdir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _owned_folder(self, path: str) -> None:
        os.makedirs(path, mode=0o700)
        if self.prefix:
            shutil.chown(path, user="postgres", group=pwd.getpwnam("postgres").pw_gid)

    def start(self) -> None:
        self._start_etcd()
        for node in self.nodes:
            self._owned_folder(node.folder)
            config = os.path.join(node.folder, "patroni.yml")
            with open(config, "w") as f:
                yaml.safe_dump(self._node_config(node), f)
            node.process = self._spawn([self.patroni, config], node.logpath)
        leader = self.wait_leader(timeout=START_TIMEOUT)
        self.wait_replicas(timeout=START_TIMEOUT)
        with psycopg.connect(self.conninfo(leader, "postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DBNAME}")

    def _start_etcd(self) -> None:
        folder = os.path.join(self.tmpdir, "etcd")
        self._owned_folder(folder)
        peer = free_port()
        self.etcd_port = free_port()
        client = f"http://127.0.0.1:{self.etcd_port}"
        command = [
            self.etcd,
            "--name=etcd0",
            f"--data-dir={folder}/data",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=etcd0=http://127.0.0.1:{peer}",
            "--initial-cluster-state=new",
            f"--initial-cluster-token={self.scope}",
            "--listen-metrics-urls=",
        ]
        self.etcd_process = self._spawn(command, os.path.join(folder, "etcd.log"))
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.etcd_process.poll() is not None:
                break
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{client}/health", timeout=1) as r:
                if json.loads(r.read()).get("health") == "true":
                    return
            time.sleep(0.1)
        raise TestbedError(f"etcd did not start:\n{tail(os.path.join(folder, 'etcd.log'))}")

    def _node_config(self, node: Node) -> dict[str, object]:
        address = f"127.0.0.1:{node.pg_port}"
        return {
            "scope": self.scope,
            "namespace": "/berth-testbed/",
            "name": node.name,
            "log": {"level": "INFO"},
            "restapi": {"listen": f"127.0.0.1:{node.api_port}", "connect_address": f"127.0.0.1:{node.api_port}"},
            "etcd3": {"hosts": f"127.0.0.1:{self.etcd_port}"},
            "bootstrap": {
                "dcs": {
                    "ttl": 20,
                    "loop_wait": 1,
                    "retry_timeout": 5,
                    "primary_start_timeout": 0,
                    "synchronous_mode": True,
                    "postgresql": {
                        "use_pg_rewind": True,
                        "use_slots": True,
                        "parameters": {
                            "max_connections": 200,
                            "fsync": "off",
                            "wal_log_hints": "on",
                            "max_wal_senders": 10,
                            "max_replication_slots": 10,
                        },
                    },
                },
                "initdb": [{"encoding": "UTF8"}, "no-locale", {"auth": "trust"}],
            },
            "postgresql": {
                "listen": address,
                "connect_address": address,
                "data_dir": node.datadir,
                "bin_dir": self.bindir,
                "pgpass": os.path.join(node.folder, "pgpass"),
                "authentication": {
                    "superuser": {"username": USER},
                    "replication": {"username": USER},
                    "rewind": {"username": USER},
                },
                "parameters": {"unix_socket_directories": node.folder},
                "pg_hba": [
                    "local all all trust",
                    "host all all 127.0.0.1/32 trust",
                    "host replication all 127.0.0.1/32 trust",
                ],
            },
            "tags": {"nofailover": False, "noloadbalance": False, "clonefrom": False, "nosync": False},
        }

    def conninfo(self, name: str, dbname: str = DBNAME) -> str:
        return f"host=127.0.0.1 port={self.node(name).pg_port} user={USER} dbname={dbname} connect_timeout=2"

    # -- state

    def leader(self) -> str | None:
        """The node that is primary and running, by Patroni's word."""
        for node in self.nodes:
            status = node.status()
            if status and status.get("role") in ("master", "primary") and status.get("state") == "running":
                return node.name
        return None

    def wait_leader(self, timeout: float, other_than: str | None = None) -> str:
        """The primary's name once there is one (not ``other_than``) taking writes."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            name = self.leader()
            if name is not None and name != other_than and self._takes_writes(name):
                return name
            time.sleep(0.2)
        raise TestbedError(f"no PostgreSQL primary within {timeout:.0f}s:\n{self.log_tails()}")

    def _takes_writes(self, name: str) -> bool:
        try:
            with psycopg.connect(self.conninfo(name, "postgres"), autocommit=True) as conn:
                row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
                return row is not None and not row[0]
        except psycopg.OperationalError:
            return False

    def wait_replicas(self, timeout: float) -> None:
        """Until every other node streams from the primary and Patroni has named one of them the
        synchronous standby (only that one may be promoted)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            leader = self.leader()
            members = self.cluster_members(leader) if leader is not None else []
            replicas = [m for m in members if m.get("name") != leader and m.get("state") in ("running", "streaming")]
            if len(replicas) == len(self.nodes) - 1 and any(m.get("role") == "sync_standby" for m in replicas):
                return
            time.sleep(0.2)
        raise TestbedError(f"the replicas did not catch up within {timeout:.0f}s:\n{self.log_tails()}")

    def cluster_members(self, name: str) -> list[dict[str, object]]:
        """The members as Patroni's REST API of node ``name`` lists them (``GET /cluster``)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.node(name).api_port}/cluster", timeout=2) as r:
                members: list[dict[str, object]] = json.loads(r.read()).get("members", [])
                return members
        except (OSError, ValueError):
            return []

    def _check_alive(self) -> None:
        for node in self.nodes:
            if node.process is not None and node.process.poll() is not None:
                raise TestbedError(f"patroni of {node.name} exited:\n{tail(node.logpath)}")

    # -- faults

    def crash_leader(self) -> str:
        """kill -9 of the primary's postmaster and every backend at once; the node's name."""
        leader = self.leader()
        if leader is None:
            raise TestbedError("no primary to crash")
        node = self.node(leader)
        postmaster = node.postmaster_pid()
        if postmaster is None:
            raise TestbedError(f"no postmaster.pid for {leader}")
        for pid in processes.process_tree(postmaster):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.crashed_at = time.time()
        node.crashes.append(postmaster)
        return leader

    # -- stop

    def log_tails(self, lines: int = 15) -> str:
        return "\n".join(f"--- {n.name} ---\n{tail(n.logpath, lines)}" for n in self.nodes)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        atexit.unregister(self.stop)
        running = [n.process for n in self.nodes if n.process is not None and n.process.poll() is None]
        for process in running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        for process in running:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
        for node in self.nodes:
            if node.process is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(node.process.pid, signal.SIGKILL)
                node.process.wait()
            # Patroni starts each postmaster in a session of its own.
            postmaster = node.postmaster_pid()
            if postmaster is not None:
                for pid in processes.process_tree(postmaster):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
        if self.etcd_process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.etcd_process.pid, signal.SIGKILL)
            self.etcd_process.wait()
        shutil.rmtree(self.tmpdir, ignore_errors=True)


def start_cluster(nodes: int = 2) -> PatroniCluster:
    cluster = PatroniCluster(nodes)
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster
