"""The simulated cloud's processes: a ``berth serve`` with several workers, ``berth conductor``
processes on one database, the host pools (many hosts per process, ``berth.testbed.sim.cloud.hostpool``)
and a few hosts as ``berth agent`` processes of their own, which faults may kill; the shared disk
pools set in the service. Every host registers with the conductors in its availability zone: the
agent processes themselves, the pooled hosts in batches (``PUT /hosts``) from a thread of the run."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import requests
import yaml

from berth.clients.agent import AgentClient
from berth.clients.http import connection_pools
from berth.clients.placement import PlacementClient
from berth.testbed.errors import TestbedError
from berth.testbed.logs import tail
from berth.testbed.loopback import free_port
from berth.testbed.processes import stop_group
from berth.testbed.services.conductor import ConductorProcess
from berth.testbed.services.server import Server
from berth.testbed.sim.api import ConductorsApi
from berth.testbed.sim.cloud.hostpool import PREFIX
from berth.testbed.sim.cloud.layout import GPU_ALIAS, POOL_DISK_GB, HostSpec, Layout
from berth.testbed.sim.config import SimConfig

LOG = logging.getLogger(__name__)

SHARES_TRAIT = "MISC_SHARES_VIA_AGGREGATE"
START_TIMEOUT = 900.0
AGENT_TIMEOUT = 60.0
# The age a worker of ``berth serve`` must have before it is killed (see ``Cloud.kill_api_worker``).
WORKER_MIN_AGE = 8.0
# Pooled hosts registered per ``PUT /hosts`` at the start (each new one costs the conductor a look
# at its compute node in the service), and by how many threads.
REGISTER_BATCH = 100
REGISTERING_AT_ONCE = 4


class SimServer(Server):
    """``berth serve`` whose limited candidate answers are drawn at random: with a candidate limit
    every scheduler would otherwise be offered the same first hosts."""

    def _spawn(self) -> subprocess.Popen[bytes]:
        command = [sys.executable, "-m", "berth.cli.main", "serve", "--bind", f"127.0.0.1:{self.port}"]
        command += ["--database", self.database_url, "--workers", str(self.workers), "--randomize-candidates"]
        command += self.extra
        with open(self.logpath, "ab") as logfile:
            return subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=logfile, stderr=subprocess.STDOUT, start_new_session=True
            )


def _wait_answering(url: str, process: subprocess.Popen[bytes], timeout: float, what: str, logpath: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise TestbedError(f"{what} exited:\n{tail(logpath)}")
        with contextlib.suppress(requests.RequestException):
            if requests.get(url, timeout=2).ok:
                return
        time.sleep(0.2)
    raise TestbedError(f"{what} did not answer within {timeout:.0f} s:\n{tail(logpath)}")


def _age_seconds(pid: int) -> float:
    """How long the process has run (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            started = int(f.read().rpartition(")")[2].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return uptime - started / os.sysconf("SC_CLK_TCK")


class AgentProcess:
    """One host as a ``berth agent`` process of its own, on a fixed port so that it can be killed
    and started again behind the same URL."""

    def __init__(self, host: HostSpec, placement_url: str, folder: str, registration: list[str]):
        self.host = host
        self.placement_url = placement_url
        # --conductor URLs --zone Z --heartbeat-interval S
        self.registration = registration
        self.config_path = os.path.join(folder, f"{host.name}.yaml")
        with open(self.config_path, "w") as f:
            yaml.safe_dump(host.config, f)
        self.state_dir = os.path.join(folder, "state")
        self.logpath = os.path.join(folder, f"{host.name}.log")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        # Two faults may strike one agent at once (a host down, a kill mid-migration): one kill or
        # restart at a time, or a second process started beside the first fails to bind the port
        # while the first lives on untracked.
        self.lock = threading.RLock()

    def spawn(self) -> None:
        command = [sys.executable, "-m", "berth.cli.main", "agent", "--host", self.host.name]
        command += ["--placement", self.placement_url, "--driver", "fake", "--config", self.config_path]
        command += ["--bind", f"127.0.0.1:{self.port}", "--state-dir", self.state_dir, "--audit-interval", "0"]
        command += [*self.registration, "--zone", self.host.zone]
        # Each request in its log: what a failed run kept is read from the logs.
        command += ["--access-log"]
        with open(self.logpath, "ab") as log:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def wait(self) -> None:
        assert self.process is not None
        _wait_answering(self.url + "/", self.process, AGENT_TIMEOUT, f"berth agent {self.host.name}", self.logpath)

    def kill(self) -> None:
        """kill -9 of the agent's whole process group."""
        with self.lock:
            stop_group(self.process, signal.SIGKILL)

    def restart(self) -> None:
        with self.lock:
            self.kill()
            self.spawn()
            self.wait()

    def stop(self) -> None:
        stop_group(self.process)


class HostPoolProcess:
    def __init__(self, hosts: list[HostSpec], placement_url: str, folder: str, index: int):
        self.hosts = hosts
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.logpath = os.path.join(folder, f"pool-{index}.log")
        self.spec_path = os.path.join(folder, f"pool-{index}.json")
        spec: dict[str, Any] = {
            "bind": f"127.0.0.1:{self.port}",
            "placement": placement_url,
            "state_dir": os.path.join(folder, f"pool-{index}-state"),
            "hosts": {h.name: h.config for h in hosts},
        }
        with open(self.spec_path, "wb") as f:
            f.write(orjson.dumps(spec))
        self.process: subprocess.Popen[bytes] | None = None

    def spawn(self) -> None:
        with open(self.logpath, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "berth.testbed.sim.cloud.hostpool", self.spec_path],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait(self) -> None:
        assert self.process is not None
        _wait_answering(self.url + "/", self.process, START_TIMEOUT, "the host pool", self.logpath)

    def host_url(self, name: str) -> str:
        return f"{self.url}{PREFIX}{name}"

    def stop(self) -> None:
        stop_group(self.process)


class Cloud:
    """The processes of a run, started in ``start`` and stopped in ``stop``."""

    def __init__(self, layout: Layout, database_url: str, config: SimConfig, folder: str, conductors_url: str):
        self.layout = layout
        self.folder = folder
        self.config = config
        # With --quota the service enforces the quotas on every allocation write, not on picks alone.
        enforce = ["--enforce-quotas-on-allocations"] if config.quota is not None else []
        self.server = SimServer(database_url, config.workers, folder, enforce)
        self.pool_count = max(1, config.pools)
        self.conductors_url = conductors_url
        self.conductors: list[ConductorProcess] = []
        self.api = ConductorsApi([])
        self.pools: list[HostPoolProcess] = []
        self.real: dict[str, AgentProcess] = {}
        self.urls: dict[str, str] = {}
        self.placement: PlacementClient | None = None
        # Host -> its compute node's uuid.
        self.roots: dict[str, str] = {}
        self._local = threading.local()
        self._beating = threading.Event()
        self._beats: threading.Thread | None = None
        self._crashing = threading.Lock()
        self._restarts: list[threading.Thread] = []

    def start(self, log: Any) -> None:
        self.server.start()
        self.placement = PlacementClient(self.server.url)
        self._make_pools(self.placement)
        self._start_conductors(log)
        urls = [c.url for c in self.conductors]
        registration = ["--conductor", ",".join(urls), "--heartbeat-interval", str(self.config.agent_beat_interval)]
        pooled = [h for h in self.layout.hosts if not h.real]
        for i in range(self.pool_count):
            share = pooled[i :: self.pool_count]
            if share:
                self.pools.append(HostPoolProcess(share, self.server.url, self.folder, i))
        for host in self.layout.hosts:
            if host.real:
                self.real[host.name] = AgentProcess(host, self.server.url, self.folder, registration)
        for process in self._processes():
            process.spawn()
        log(f"starting {len(pooled)} hosts in {len(self.pools)} pool(s) and {len(self.real)} agent processes")
        for process in self._processes():
            process.wait()
        for pool in self.pools:
            for host in pool.hosts:
                self.urls[host.name] = pool.host_url(host.name)
        for name, agent in self.real.items():
            self.urls[name] = agent.url
        log(f"registering the {len(pooled)} pooled hosts with the conductors")
        self._register_pooled(REGISTER_BATCH, REGISTERING_AT_ONCE)
        # Beating from now on: the first registered may otherwise count as down before the last is.
        self._beats = threading.Thread(target=self._beat_pooled, name="sim-pool-beats", daemon=True)
        self._beats.start()
        self._wait_registered(set(self.urls))
        self._read_roots(self.placement)

    def _conductor_arguments(self) -> list[str]:
        c = self.config
        alias = {"name": GPU_ALIAS.name, "vendor_id": GPU_ALIAS.vendor_id, "product_id": GPU_ALIAS.product_id}
        return [
            *("--heartbeat-interval", str(c.heartbeat_interval), "--dead-after", str(c.dead_after)),
            *("--host-down-after", str(c.host_down_after), "--max-attempts", "3"),
            *("--pci-aliases", orjson.dumps([alias]).decode(), "--host-subset-size", "4"),
            # Filters that read the agents' snapshots read one per candidate: keep the candidates few.
            *("--max-placement-results", "40", "--threads", "16"),
        ]

    def _start_conductors(self, log: Any) -> None:
        count = self.config.conductors or (os.cpu_count() or 1)
        extra = self._conductor_arguments()
        self.conductors = [
            ConductorProcess(self.server.url, self.conductors_url, self.folder, name=f"conductor-{i}", extra=extra)
            for i in range(count)
        ]
        log(f"starting {count} conductor processes")
        # One at a time: the first makes the tables.
        for conductor in self.conductors:
            conductor.start()
        self.api = ConductorsApi([c.url for c in self.conductors])
        self.api.make_flavors()

    def _pooled_entries(self) -> list[dict[str, Any]]:
        return [
            {"name": h.name, "url": pool.host_url(h.name), "zone": h.zone} for pool in self.pools for h in pool.hosts
        ]

    def _register_pooled(self, batch: int, threads: int) -> None:
        entries = self._pooled_entries()
        batches = [entries[i : i + batch] for i in range(0, len(entries), batch)]
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(self.api.register_hosts, batches))

    def _wait_registered(self, names: set[str], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            hosts = self.api.request("GET", "/hosts")["hosts"]
            missing = names - {h["name"] for h in hosts if h["state"] == "up"}
            if not missing:
                return
            if time.monotonic() > deadline:
                # What the conductors know of them, and what the agent processes among them said.
                known = {h["name"]: h for h in hosts if h["name"] in missing}
                logs = "".join(
                    f"\n--- {name}'s log ---\n{tail(self.real[name].logpath)}"
                    for name in sorted(missing)
                    if name in self.real
                )
                raise TestbedError(
                    f"hosts not registered with the conductors: {sorted(missing)[:10]}; "
                    f"as the conductors have them: {[known.get(name) for name in sorted(missing)[:10]]}{logs}"
                )
            time.sleep(0.5)

    def _beat_pooled(self) -> None:
        """Every pooled host's heartbeat, all in one request per interval."""
        entries = self._pooled_entries()
        while not self._beating.wait(self.config.pool_beat_interval):
            try:
                self.api.register_hosts(entries)
            except Exception as e:  # noqa: BLE001 - the next beat tries again (a conductor killed, say)
                LOG.info("the pooled hosts' heartbeat failed: %s", e)

    def _read_roots(self, placement: PlacementClient) -> None:
        names = set(self.urls)
        for provider in placement.get("/resource_providers")["resource_providers"]:
            if provider["name"] in names:
                self.roots[provider["name"]] = str(provider["uuid"])

    def conductor_pids(self) -> list[int]:
        return [c.process.pid for c in self.conductors if c.process is not None and c.running()]

    def host_pids(self) -> list[int]:
        """The host pools' and the agent processes' (those running)."""
        return [p.process.pid for p in self._processes() if p.process is not None and p.process.poll() is None]

    def server_pids(self) -> list[int]:
        return [self.server.process.pid] if self.server.process is not None and self.server.running() else []

    def _processes(self) -> list[AgentProcess | HostPoolProcess]:
        return [*self.real.values(), *self.pools]

    def agents(self) -> dict[str, AgentClient]:
        """A client of every host's agent, by host name, for one thread (a conductor): the clients
        share their connection pools, so that the pooled hosts, all behind one address, share connections."""
        shared = connection_pools()
        return {name: AgentClient(url, timeout=60.0, pools=shared) for name, url in self.urls.items()}

    def agents_of_thread(self) -> dict[str, AgentClient]:
        """``agents()`` made once for the calling thread."""
        made: dict[str, AgentClient] | None = getattr(self._local, "agents", None)
        if made is None:
            made = self._local.agents = self.agents()
        return made

    def _make_pools(self, placement: PlacementClient) -> None:
        """The shared disk pools: a provider with DISK_GB, sharing it with its aggregate's members."""
        for index, (provider, aggregate) in self.layout.pools.items():
            placement.create_provider(f"sim-disk-pool-{index}", provider)
            generation = placement.set_inventories(provider, 0, {"DISK_GB": {"total": POOL_DISK_GB}})
            generation = placement.set_traits(provider, generation, [SHARES_TRAIT])
            placement.set_aggregates(provider, generation, [aggregate])

    def kill_api_worker(self, rng_choice: Any) -> str | None:
        """SIGKILL to a worker of ``berth serve`` that has run long enough; what was done, or None."""
        # Granian's master exits altogether when a worker it respawned dies again within 5.5 s
        # (its crash loop rule): only a worker older than that is killed.
        workers = [pid for pid in self.server.worker_pids() if _age_seconds(pid) > WORKER_MIN_AGE]
        if not workers:
            return None
        victim = rng_choice(workers)
        os.kill(victim, signal.SIGKILL)
        return f"SIGKILL to API worker {victim} of {len(workers)}"

    def crash_conductor(
        self, choice: Callable[[list[ConductorProcess]], ConductorProcess], before: Callable[[], None]
    ) -> str | None:
        """SIGKILL to one conductor process, started again (on its port) ``conductor_down`` seconds
        later in a thread of its own; one at a time, and never the last one running. What was done."""
        if not self._crashing.acquire(blocking=False):
            return None
        alive = [c for c in self.conductors if c.running()]
        if len(alive) < 2:
            self._crashing.release()
            return None
        victim = choice(alive)
        before()
        victim.kill()

        def restart() -> None:
            try:
                time.sleep(self.config.conductor_down)
                victim.start(port=victim.port)
            except TestbedError as e:
                LOG.error("conductor %s did not start again: %s", victim.url, e)
            finally:
                self._crashing.release()

        thread = threading.Thread(target=restart, name="sim-conductor-restart", daemon=True)
        self._restarts.append(thread)
        thread.start()
        return f"SIGKILL to conductor {victim.url}"

    def conductors_back(self) -> None:
        """Every conductor a fault killed started again."""
        for thread in self._restarts:
            thread.join()

    def exited(self) -> list[str]:
        """The processes of the run that are no longer running (none should be, before ``stop``)."""
        gone = [] if self.server.running() else ["berth serve"]
        gone += [f"berth conductor {c.logpath}" for c in self.conductors if not c.running()]
        gone += [f"host pool {p.logpath}" for p in self.pools if p.process is None or p.process.poll() is not None]
        gone += [
            f"berth agent {a.host.name}"
            for a in self.real.values()
            if a.process is None or a.process.poll() is not None
        ]
        return gone

    def stop(self) -> list[str]:
        """Stop everything; the lines of the logs that show a traceback."""
        self._beating.set()
        if self._beats is not None:
            self._beats.join(timeout=10)
        for process in self._processes():
            process.stop()
        for conductor in self.conductors:
            conductor.stop(grace=5.0)
        self.server.stop(grace=2.0)
        problems = []
        logs = [self.server.logpath, *(c.logpath for c in self.conductors), *(p.logpath for p in self.pools)]
        for path in [*logs, *(a.logpath for a in self.real.values())]:
            text = tail(path, 100000)
            if "Traceback" in text:
                problems.append(path)
        return problems
