"""``berth cloud``: a whole small cloud on one machine, in one folder, to try.

    berth cloud [--folder ./berth-cloud] [--hosts 3] [--placement-port 8778] [--conductor-port 8774]

It starts ``berth serve`` and ``berth conductor`` on SQLite files in the folder and ``--hosts`` fake-driver
agents that register with the conductor, waits for them, makes three example flavors, prints what to try,
and runs until Ctrl-C (SIGINT or SIGTERM), when it stops every process it started. Run again on the
same folder, it takes up the same cloud: the databases and the agents' claims are kept there. One
cloud runs in a folder at a time (it locks ``cloud.lock`` there): a second is refused before it starts
anything. The service's dashboard shows the conductor's control plane (hosts, operations).
"""

from __future__ import annotations

import fcntl
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

import click
import yaml

from berth.cli.services.cloud_processes import Child, StartFailed, answers_at, child_environment, port_taken, stop_all
from berth.clients.conductor import ConductorClient, ConductorError
from berth.testbed.loopback import free_port

ZONES = ("zone-1", "zone-2")
# A small host: two NUMA cells, a local disk.
TOPOLOGY = {"cells": [{"cpus": 4, "memory_mb": 8192}, {"cpus": 4, "memory_mb": 8192}], "disk_gb": 200}
# OpenStack's classic example flavors.
FLAVORS = (
    {"name": "m1.tiny", "vcpus": 1, "ram": 512, "disk": 1},
    {"name": "m1.small", "vcpus": 1, "ram": 2048, "disk": 20},
    {"name": "m1.medium", "vcpus": 2, "ram": 4096, "disk": 40},
)
START_TIMEOUT = 60.0
# Request threads per conductor: plenty for one person trying it, and within what the HTTP server
# takes without warning on a small machine (twice the cores and one).
CONDUCTOR_THREADS = min(4, 2 * (os.cpu_count() or 1) + 1)
# Loopback only, so the development mode's tokens (admin, user:project) are all the cloud asks for.
LOOPBACK = "127.0.0.1"
# In the folder, locked by the cloud that runs there for as long as it runs; it holds its pid.
LOCK_FILE = "cloud.lock"


class Stopped(Exception):
    """SIGINT or SIGTERM arrived."""


class FolderTaken(Exception):
    """Another ``berth cloud`` runs in the folder: the message says which and what to do."""


def hold_folder(folder: Path) -> int:
    """Lock ``folder`` for this cloud (the descriptor of its lock file, to close when the cloud
    stops; the kernel lets go of it however the process ends) and write this process's pid in the
    file; :class:`FolderTaken` when another cloud holds it. Two clouds on one folder would share its
    databases and its agents' state: the second's agents could not take their hosts, and its
    conductor would count the first one's hosts as its own."""
    path = folder / LOCK_FILE
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(descriptor, 32, 0).decode(errors="replace").strip()
        os.close(descriptor)
        pid = f" (pid {holder})" if holder.isdigit() else ""
        raise FolderTaken(
            f"another berth cloud{pid} runs in the folder {folder}; stop it (Ctrl-C where it runs) or choose "
            "another --folder."
        ) from None
    except BaseException:
        os.close(descriptor)
        raise
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
    return descriptor


@click.command(
    "cloud",
    help="Run a whole small cloud on this machine to try: the service, a conductor and fake hosts that register "
    "with it, on 127.0.0.1, until Ctrl-C.",
)
@click.option(
    "--folder",
    default="berth-cloud",
    show_default=True,
    type=click.Path(file_okay=False),
    help="where the databases, the agents' state and the logs are kept",
)
@click.option("--hosts", default=3, show_default=True, type=click.IntRange(1, 50), help="fake hosts to start")
@click.option(
    "--placement-port", default=8778, show_default=True, type=click.IntRange(1, 65535), help="the service's port"
)
@click.option(
    "--conductor-port", default=8774, show_default=True, type=click.IntRange(1, 65535), help="the conductor's port"
)
def cloud_command(folder: str, hosts: int, placement_port: int, conductor_port: int) -> int:
    if placement_port == conductor_port:
        raise click.UsageError("--placement-port and --conductor-port must differ")
    for option, port in (("--placement-port", placement_port), ("--conductor-port", conductor_port)):
        if port_taken(port):
            click.echo(
                f"berth cloud: port {port} of {LOOPBACK} is already in use by another process; stop it or "
                f"choose another {option}.",
                err=True,
            )
            raise click.exceptions.Exit(1)
    cloud = LocalCloud(Path(folder).resolve(), hosts, placement_port, conductor_port)
    try:
        cloud.logs.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        click.echo(
            f"berth cloud: cannot make the folder {cloud.logs}: {e.strerror}; choose another --folder.", err=True
        )
        raise click.exceptions.Exit(1) from None
    try:
        lock = hold_folder(cloud.folder)
    except FolderTaken as e:
        click.echo(f"berth cloud: {e}", err=True)
        raise click.exceptions.Exit(1) from None
    except OSError as e:
        click.echo(
            f"berth cloud: cannot lock the folder {cloud.folder}: {e.strerror}; choose another --folder.", err=True
        )
        raise click.exceptions.Exit(1) from None
    try:
        status = cloud.run()
    finally:
        os.close(lock)
    if status:
        raise click.exceptions.Exit(status)
    return 0


class LocalCloud:
    def __init__(self, folder: Path, hosts: int, placement_port: int, conductor_port: int):
        self.folder = folder
        self.logs = folder / "logs"
        self.placement_url = f"http://{LOOPBACK}:{placement_port}"
        self.conductor_url = f"http://{LOOPBACK}:{conductor_port}"
        self.hosts = {f"host-{i}": ZONES[(i - 1) % len(ZONES)] for i in range(1, hosts + 1)}
        self.service = Child(
            "berth serve",
            ["serve", "--bind", f"{LOOPBACK}:{placement_port}", "--workers", "1"]
            + ["--database", f"sqlite:///{folder / 'placement.sqlite'}"]
            # The dashboard's control-plane section, read from the conductor by the page.
            + ["--dashboard-conductor", self.conductor_url],
            self.logs / "placement.log",
            port_option="--placement-port",
        )
        self.conductor = Child(
            "berth conductor",
            ["conductor", "--bind", f"{LOOPBACK}:{conductor_port}", "--placement", self.placement_url]
            + ["--database", f"sqlite:///{folder / 'conductor.sqlite'}", "--workers", "2"]
            + ["--threads", str(CONDUCTOR_THREADS)]
            # The service's dashboard reads the conductor from the service's origin.
            + ["--cors-allowed-origin", self.placement_url],
            self.logs / "conductor.log",
            port_option="--conductor-port",
        )
        self.agents: dict[str, Child] = {}
        self._stopping = False

    def run(self) -> int:
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        status = 0
        try:
            self._start()
            self._say_ready()
            status = self._watch()
        except Stopped:
            pass
        except (StartFailed, ConductorError) as e:
            click.echo(f"berth cloud: {e}", err=True)
            status = 1
        finally:
            # Ignored while stopping: a second Ctrl-C must not leave processes behind.
            for sig in previous:
                signal.signal(sig, signal.SIG_IGN)
            started = [c for c in [*self.agents.values(), self.conductor, self.service] if c.process is not None]
            if started:
                click.echo(f"Stopping {len(started)} process{'es' if len(started) > 1 else ''} ...", err=True)
                stop_all(started)
                click.echo(f"Stopped {', '.join(c.name for c in started)}.", err=True)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return status

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # Only noted here: raised at any point, it could fall between a process's start and its
        # record, and leave that process running.
        self._stopping = True

    def _check_stop(self) -> None:
        if self._stopping:
            raise Stopped

    def _start(self) -> None:
        environment = child_environment(os.environ)
        # The agents' folders first: one that cannot be made stops the cloud before anything starts.
        states = {name: self._agent_state(name) for name in self.hosts}
        self._check_stop()
        click.echo(f"Starting the service on {self.placement_url} ...")
        self.service.start(environment)
        self.service.wait_until(answers_at(self.placement_url + "/"), START_TIMEOUT, self._check_stop)
        click.echo(f"Starting the conductor on {self.conductor_url} ...")
        self.conductor.start(environment)
        self.conductor.wait_until(answers_at(self.conductor_url + "/healthz"), START_TIMEOUT, self._check_stop)
        click.echo(f"Starting {len(self.hosts)} fake hosts ...")
        for name, zone in self.hosts.items():
            self._check_stop()
            self.agents[name] = self._agent(name, zone, states[name])
            self.agents[name].start(environment)
        client = ConductorClient(self.conductor_url, "admin")
        self._wait_for_registrations(client)
        self._ensure_flavors(client)

    def _agent_state(self, name: str) -> Path:
        """The agent's folder, with its configuration written in it; StartFailed saying what is
        in the way when it cannot be made."""
        state = self.folder / "agents" / name
        try:
            state.mkdir(parents=True, exist_ok=True)
            (state / "agent.yaml").write_text(yaml.safe_dump({"fake": TOPOLOGY}))
        except OSError as e:
            blocking = next((p for p in (state, *state.parents) if p.exists() and not p.is_dir()), None)
            why = f"{blocking} is a file, not a folder" if blocking is not None else e.strerror
            raise StartFailed(
                f"cannot make the agents' folder {state}: {why}; move it away or choose another --folder."
            ) from None
        return state

    def _agent(self, name: str, zone: str, state: Path) -> Child:
        config = state / "agent.yaml"
        arguments = ["agent", "--host", name, "--driver", "fake", "--config", str(config)]
        arguments += ["--bind", f"{LOOPBACK}:{free_port()}", "--state-dir", str(state)]
        arguments += ["--placement", self.placement_url, "--conductor", self.conductor_url, "--zone", zone]
        return Child(f"agent {name}", arguments, self.logs / f"agent-{name}.log")

    def _wait_for_registrations(self, client: ConductorClient) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            self._check_stop()
            for agent in self.agents.values():
                status = agent.exit_status()
                if status is not None:
                    raise StartFailed(agent.exit_message(status))
            try:
                up = {h["name"] for h in client.get("/hosts")["hosts"] if h["state"] == "up"}
            except ConductorError:
                up = set()
            missing = sorted(set(self.hosts) - up)
            if not missing:
                return
            if time.monotonic() > deadline:
                raise StartFailed(f"not registered with the conductor within {START_TIMEOUT:.0f} s: {missing}")
            time.sleep(0.2)

    @staticmethod
    def _ensure_flavors(client: ConductorClient) -> None:
        known = {f["name"] for f in client.get("/flavors")["flavors"]}
        for flavor in FLAVORS:
            if flavor["name"] not in known:
                client.request("POST", "/flavors", {"flavor": flavor})

    def _say_ready(self) -> None:
        zones = ", ".join(f"{name} ({zone})" for name, zone in self.hosts.items())
        environment = ""
        if self.conductor_url != "http://127.0.0.1:8774" or self.placement_url != "http://127.0.0.1:8778":
            environment = (
                f"  export BERTH_CONDUCTOR_URL={self.conductor_url} BERTH_URL={self.placement_url}"
                "   # these ports are not the defaults\n"
            )
        click.echo(
            f"\nBerth cloud ready: the service at {self.placement_url}, a conductor at {self.conductor_url}, "
            f"hosts {zones}; flavors {', '.join(str(f['name']) for f in FLAVORS)}.\n\n"
            "Try, in another terminal:\n"
            f"{environment}"
            "  berth server create web --flavor m1.small --wait\n"
            "  berth server list\n"
            "  berth host list\n"
            "  berth provider list\n"
            f"The dashboard: {self.placement_url}/dashboard\n"
            f"The conductors' HTTP API (servers, flavors, hosts, operations; docs/conductor.md), token admin:\n"
            f"  curl -s -H 'X-Auth-Token: admin' {self.conductor_url}/hosts\n"
            f"Logs: {self.logs}; databases and the agents' state: {self.folder}\n"
            "Ctrl-C stops the cloud.\n"
        )
        sys.stdout.flush()

    def _watch(self) -> int:
        """Until a signal: an agent that exits is said (its host goes down, as a real one would);
        the service or the conductor exiting ends the cloud with status 1."""
        told: set[str] = set()
        while True:
            self._check_stop()
            for child in [self.service, self.conductor, *self.agents.values()]:
                status = child.exit_status()
                if status is None or child.name in told:
                    continue
                told.add(child.name)
                click.echo(f"berth cloud: {child.name} exited with status {status}; see {child.logpath}", err=True)
                if child in (self.service, self.conductor):
                    return 1
            time.sleep(0.5)
