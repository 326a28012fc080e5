"""The simulated cloud's processes: a ``berth serve`` with several workers, the host pools (many
hosts per process, ``berth.testbed.sim.hostpool``) and a few hosts as ``berth agent`` processes of
their own, which faults may kill; the shared disk pools and availability zones set in the service."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import requests
import yaml

from berth.clients.agent import AgentClient
from berth.clients.placement import PlacementClient
from berth.testbed.errors import TestbedError
from berth.testbed.logs import tail
from berth.testbed.loopback import free_port
from berth.testbed.server import Server
from berth.testbed.sim.hostpool import PREFIX
from berth.testbed.sim.layout import POOL_DISK_GB, HostSpec, Layout

SHARES_TRAIT = "MISC_SHARES_VIA_AGGREGATE"
START_TIMEOUT = 900.0
AGENT_TIMEOUT = 60.0
# The age a worker of ``berth serve`` must have before it is killed (see ``Cloud.kill_api_worker``).
WORKER_MIN_AGE = 8.0


class SimServer(Server):
    """``berth serve`` whose limited candidate answers are drawn at random: with a candidate limit
    every scheduler would otherwise be offered the same first hosts."""

    def _spawn(self) -> subprocess.Popen[bytes]:
        command = [sys.executable, "-m", "berth.cli.main", "serve", "--bind", f"127.0.0.1:{self.port}"]
        command += ["--database", self.database_url, "--workers", str(self.workers), "--randomize-candidates"]
        with open(self.logpath, "ab") as logfile:
            return subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=logfile, stderr=subprocess.STDOUT, start_new_session=True
            )


def session() -> requests.Session:
    """An HTTP session for the run's clients. It ignores proxy settings of the environment: requests
    would otherwise look them up again on every call, a twentieth of the conductors' CPU."""
    made = requests.Session()
    made.trust_env = False
    return made


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


def _stop(process: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM, grace: float = 10.0) -> None:
    if process is None or process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


class AgentProcess:
    """One host as a ``berth agent`` process of its own, on a fixed port so that it can be killed
    and started again behind the same URL."""

    def __init__(self, host: HostSpec, placement_url: str, folder: str):
        self.host = host
        self.placement_url = placement_url
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
            _stop(self.process, signal.SIGKILL)

    def restart(self) -> None:
        with self.lock:
            self.kill()
            self.spawn()
            self.wait()

    def stop(self) -> None:
        _stop(self.process)


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
                [sys.executable, "-m", "berth.testbed.sim.hostpool", self.spec_path],
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
        _stop(self.process)


class Cloud:
    """The processes of a run, started in ``start`` and stopped in ``stop``."""

    def __init__(self, layout: Layout, database_url: str, workers: int, folder: str, pools: int):
        self.layout = layout
        self.folder = folder
        self.server = SimServer(database_url, workers, folder)
        self.pool_count = max(1, pools)
        self.pools: list[HostPoolProcess] = []
        self.real: dict[str, AgentProcess] = {}
        self.urls: dict[str, str] = {}
        self.placement: PlacementClient | None = None
        # Host -> its compute node's uuid.
        self.roots: dict[str, str] = {}
        self._local = threading.local()

    def start(self, log: Any) -> None:
        self.server.start()
        self.placement = PlacementClient(self.server.url, session=session())
        self._make_pools(self.placement)
        pooled = [h for h in self.layout.hosts if not h.real]
        for i in range(self.pool_count):
            share = pooled[i :: self.pool_count]
            if share:
                self.pools.append(HostPoolProcess(share, self.server.url, self.folder, i))
        for host in self.layout.hosts:
            if host.real:
                self.real[host.name] = AgentProcess(host, self.server.url, self.folder)
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
        self._join_zones(self.placement)

    def _processes(self) -> list[AgentProcess | HostPoolProcess]:
        return [*self.real.values(), *self.pools]

    def agents(self) -> dict[str, AgentClient]:
        """A client of every host's agent, by host name, for one thread (a conductor): the clients
        share one session, so that the pooled hosts, all behind one address, share its connections."""
        shared = session()
        clients = {}
        for name, url in self.urls.items():
            client = clients[name] = AgentClient(url, timeout=60.0)
            client.session = shared
        return clients

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

    def _join_zones(self, placement: PlacementClient) -> None:
        """Each compute node joins its zone's aggregate (the agents keep aggregates they did not set)."""

        def join(host: HostSpec) -> None:
            found = placement.find_provider(host.name)
            if found is None:
                raise TestbedError(f"host {host.name} has no provider")
            uuid = self.roots[host.name] = str(found["uuid"])
            for _ in range(8):
                generation, current = placement.get_aggregates(uuid)
                try:
                    placement.set_aggregates(uuid, generation, current | {self.layout.zone_aggregates[host.zone]})
                    return
                except Exception:  # noqa: BLE001 - a generation conflict with the host's own sync: read again
                    time.sleep(0.05)
            raise TestbedError(f"could not put {host.name} in zone {host.zone}")

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(join, self.layout.hosts))

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

    def exited(self) -> list[str]:
        """The processes of the run that are no longer running (none should be, before ``stop``)."""
        gone = [] if self.server.running() else ["berth serve"]
        gone += [f"host pool {p.logpath}" for p in self.pools if p.process is None or p.process.poll() is not None]
        gone += [
            f"berth agent {a.host.name}"
            for a in self.real.values()
            if a.process is None or a.process.poll() is not None
        ]
        return gone

    def stop(self) -> list[str]:
        """Stop everything; the lines of the logs that show a traceback."""
        for process in self._processes():
            process.stop()
        self.server.stop(grace=2.0)
        problems = []
        for path in [self.server.logpath, *(p.logpath for p in self.pools), *(a.logpath for a in self.real.values())]:
            text = tail(path, 100000)
            if "Traceback" in text:
                problems.append(path)
        return problems
