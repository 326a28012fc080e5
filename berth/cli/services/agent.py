"""``berth agent``: the resource tracker of one host, as a daemon.

    berth agent --host $(hostname) --placement http://127.0.0.1:8778 --driver linux [--config FILE]

It reports the host to Placement, finishes whatever a crash interrupted, runs the periodic audit, and
serves the tracker's claim operations over HTTP (see berth/tracker/agent/agent_api.py).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

from berth.cli.services.exposure import bind_host, check_bind, is_loopback
from berth.cli.settings import click_options, command_line_layer, resolve, setting
from berth.clients.placement import SERVICE_ROLES, PlacementClient

# The tracker is imported only when the agent runs: every other ``berth`` command goes without it.
if TYPE_CHECKING:
    from berth.tracker.agent.registration import Registration
    from berth.tracker.configuration.config import TrackerConfig

LOG = logging.getLogger("berth.agent")
# How long the agent's start waits for each conductor to answer the check of its host's name.
NAME_CHECK_SECONDS = 5.0


@dataclass(frozen=True)
class AgentSettings:
    """The settings of ``berth agent`` given on its command line; most can also be in its configuration file."""

    host: str = setting(
        socket.gethostname(),
        help="the host's name, also its compute node provider's name: letters, digits, '-', '_' and '.'",
        default_text="this machine's host name",
    )
    placement: str = setting(
        "http://127.0.0.1:8778", help="the Placement service", env="BERTH_PLACEMENT_URL", metavar="URL"
    )
    placement_token: str = setting(
        "admin", help="X-Auth-Token for Placement", env="BERTH_PLACEMENT_TOKEN", metavar="TOKEN"
    )
    placement_roles: tuple[str, ...] = setting(
        SERVICE_ROLES,
        help="roles to say in X-Roles, as a service user's (only the noauth2 development mode reads them: "
        "a real token carries its own); empty for none",
        env="BERTH_PLACEMENT_ROLES",
        default_text=",".join(SERVICE_ROLES),
        metavar="ROLE,...",
    )
    driver: str = setting(
        "linux",
        help="linux: this machine; fake: a host made up from the config's fake section",
        choices=("fake", "linux"),
    )
    # The defaults of the tracker's configuration (tests/test_agent_settings.py holds them equal).
    bind: str = setting("127.0.0.1:8779", help="address:port of the agent's API", metavar="HOST:PORT", check=check_bind)
    state_dir: str = setting("/var/lib/berth/agent", help="where the claim store lives", metavar="DIR")
    instances_path: str = setting(
        "/var/lib/berth/instances", help="the instances directory (linux driver)", metavar="DIR"
    )
    token: str | None = setting(
        None, help="require this X-Auth-Token on the agent's API", env="BERTH_AGENT_TOKEN", metavar="TOKEN"
    )
    audit_interval: float = setting(
        60.0, help="seconds between audits; 0 disables the periodic task", minimum=0, metavar="SECONDS"
    )
    heal: bool = setting(False, help="let the audit heal what it finds")
    conductor: tuple[str, ...] = setting(
        (),
        help="register with the conductors at this URL (repeatable, or comma-separated) and beat every "
        "--heartbeat-interval seconds; none: no registration",
        env="BERTH_CONDUCTOR_URL",
        repeatable=True,
        metavar="URL",
    )
    conductor_token: str = setting(
        "admin", help="X-Auth-Token for the conductors", env="BERTH_CONDUCTOR_TOKEN", metavar="TOKEN"
    )
    zone: str | None = setting(None, help="the host's availability zone, told to the conductors", metavar="ZONE")
    advertise_url: str | None = setting(
        None,
        help="the URL the conductors call this agent at",
        default_text="http:// and --bind",
        metavar="URL",
    )
    heartbeat_interval: float = setting(
        10.0, help="seconds between registrations with the conductors", minimum=0.1, metavar="SECONDS"
    )
    access_log: bool = setting(False, help="log every API request")
    force_insecure: bool = setting(False, help="allow the API on a non-loopback address without --token")


# Where each setting sits in the tracker's configuration file (docs/tracker.md), when it may be there.
FILE_KEYS: dict[str, tuple[str, ...]] = {
    "bind": ("agent", "bind"),
    "token": ("agent", "token"),
    "state_dir": ("state_dir",),
    "instances_path": ("instances_path",),
    "audit_interval": ("audit", "interval"),
    "heal": ("audit", "heal"),
}


def load_config(params: Mapping[str, Any], environ: Mapping[str, str]) -> tuple[AgentSettings, TrackerConfig]:
    """The agent's settings and the tracker's configuration, the first overriding the second where both speak."""
    from berth.tracker.configuration.config import TrackerConfig
    from berth.tracker.configuration.documents import read_document

    document: dict[str, Any] = {}
    config = TrackerConfig()
    config_path: str | None = params.get("config")
    if config_path:
        path = Path(config_path)
        document = read_document(path)
        config = TrackerConfig.from_dict(document, base_dir=str(path.parent))
    # The file's values as the tracker's configuration read them (paths made absolute), but only
    # those the file gives: the others are left to the environment and the defaults.
    in_file = {name: _dig(config, keys) for name, keys in FILE_KEYS.items() if _given(document, keys)}
    settings = resolve(
        AgentSettings,
        command_line=command_line_layer(params, AgentSettings),
        file=in_file,
        file_name=config_path or "",
        environ=environ,
    )
    config.state_dir = settings.state_dir
    config.instances_path = settings.instances_path
    config.audit = replace(config.audit, interval=settings.audit_interval, heal=settings.heal)
    config.agent = replace(config.agent, bind=settings.bind, token=settings.token)
    return settings, config


def _given(document: Mapping[str, Any], keys: tuple[str, ...]) -> bool:
    value: Any = document
    for key in keys:
        if not isinstance(value, Mapping) or value.get(key) is None:
            return False
        value = value[key]
    return True


def _dig(config: TrackerConfig, keys: tuple[str, ...]) -> object:
    value: object = config
    for key in keys:
        value = getattr(value, key)
    return value


def placement_client(settings: AgentSettings) -> PlacementClient:
    """The agent's client of Placement: a service's, with the roles the settings say."""
    return PlacementClient(settings.placement, settings.placement_token, roles=settings.placement_roles)


def registration(
    settings: AgentSettings, bind: str, agent_token: str | None, agent_id: str | None, *, timeout: float = 30.0
) -> Registration | None:
    """The agent's registration with the conductors, if it is told of any; ``timeout`` seconds for
    each conductor to answer."""
    from berth.clients.conductor import ConductorClient
    from berth.tracker.agent.registration import Registration

    if not settings.conductor:
        return None
    client = ConductorClient(
        list(settings.conductor), settings.conductor_token, roles=settings.placement_roles, timeout=timeout
    )
    return Registration(
        client,
        settings.host,
        settings.advertise_url or f"http://{bind}",
        zone=settings.zone,
        agent_token=agent_token,
        interval=settings.heartbeat_interval,
        agent_id=agent_id,
        token_setting="--conductor-token ($BERTH_CONDUCTOR_TOKEN)",
        host_setting="another --host name",
    )


def _wait_for_placement(client: PlacementClient, seconds: float = 30.0) -> None:
    from berth.clients.errors import PlacementError

    deadline = time.monotonic() + seconds
    while True:
        try:
            client.ping()
            return
        except PlacementError as e:
            if time.monotonic() > deadline:
                raise
            LOG.info("waiting for Placement at %s (%s)", client.url, e.detail)
            time.sleep(1.0)


def _lock_state(path: str) -> IO[str]:
    """One agent per claim store: a second one on the same host would break the lock's promise."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    # Kept open for the agent's life: closing it would drop the lock.
    handle = open(path + ".lock", "w")  # noqa: SIM115
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise SystemExit(f"another agent holds {path}.lock") from None
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


@click.command("agent", help="Run the resource tracker of one host (see docs/tracker.md).")
@click.option("--config", default=None, metavar="FILE", help="YAML or TOML configuration file (docs/tracker.md)")
@click_options(AgentSettings)
@click.option("--once", is_flag=True, help="report the host, run one audit, print it as JSON and exit")
def agent_command(**params: Any) -> int:
    status = run(params)
    if status:
        raise click.exceptions.Exit(status)
    return status


def run(params: Mapping[str, Any]) -> int:
    from berth.clients.errors import PlacementError
    from berth.domain.host.names import host_name_problem
    from berth.tracker.agent.agent_api import AgentWorker
    from berth.tracker.agent.identity import agent_id
    from berth.tracker.agent.registration import HostNameTaken
    from berth.tracker.drivers import make_driver
    from berth.tracker.errors import ConfigError, StoreError
    from berth.tracker.store import ClaimStore
    from berth.tracker.tracker import ResourceTracker
    from berth.web import server

    try:
        settings, config = load_config(params, os.environ)
        # The name is the claim store's file name and a segment of the conductors' URLs: one they
        # cannot take is refused now, not at every heartbeat.
        problem = host_name_problem(settings.host)
        if problem is not None:
            raise ConfigError(f"--host {settings.host!r}: {problem}")
        driver = make_driver(settings.driver, config)
        driver.provider_tree(settings.host, config, config.provider_config)  # configuration errors show now
    except (ConfigError, ValueError) as e:
        print(f"berth agent: {e}", file=sys.stderr)
        return 2
    host = bind_host(config.agent.bind)
    if not config.agent.token and not is_loopback(host) and not settings.force_insecure:
        print(
            f"berth agent: refusing to serve claims on {host} without a token: anyone who can reach "
            "it could claim and free this host's resources. Set --token (or agent.token), bind to a "
            "loopback address, or pass --force-insecure.",
            file=sys.stderr,
        )
        return 2
    client = placement_client(settings)
    try:
        _wait_for_placement(client)
    except PlacementError as e:
        print(f"berth agent: Placement at {settings.placement} does not answer: {e.detail}", file=sys.stderr)
        return 1
    store_path = config.store_path(settings.host)
    lock = _lock_state(store_path)

    def build_tracker() -> ResourceTracker:
        placement = placement_client(settings)
        return ResourceTracker(settings.host, driver, placement, config)

    def open_store_once() -> None:
        # The claim store opened once, before any worker: one that cannot be opened (a damaged
        # file) is said in one line and the agent exits, where each worker said it again.
        ClaimStore(store_path).close()

    try:
        if params.get("once"):
            try:
                open_store_once()
            except StoreError as e:
                print(f"berth agent: {e}", file=sys.stderr)
                return 1
            tracker = build_tracker()
            try:
                started = tracker.start()
                report = tracker.audit()
                print(
                    json.dumps(
                        {"start": started, "audit": report.to_dict(), "capacity": tracker.capacity()},
                        indent=2,
                        default=str,
                    )
                )
            finally:
                tracker.close()
            return 0
        try:
            # Made under the store's lock: the id is the claim store's (berth.tracker.agent.identity).
            this_agent = agent_id(store_path) if settings.conductor else None
        except StoreError as e:
            print(f"berth agent: {e}", file=sys.stderr)
            return 1
        LOG.info(
            "agent for %s (%s driver) on %s, claims in %s, Placement at %s%s",
            settings.host,
            settings.driver,
            config.agent.bind,
            store_path,
            settings.placement,
            f", registering as agent {this_agent}" if this_agent else "",
        )
        worker = AgentWorker(
            build_tracker,
            token=config.agent.token,
            driver_name=settings.driver,
            audit_interval=config.audit.interval,
            registration=registration(settings, config.agent.bind, config.agent.token, this_agent),
        )
        # The host's name checked with the conductors before the worker reports the host, audits it
        # or serves: a second agent under a live one's name stops here, having touched nothing. Its
        # own client: the worker's connections are made in the worker. Conductors that do not answer
        # soon leave the check to the worker's beats, which the conductors refuse just the same.
        name_check = registration(
            settings, config.agent.bind, config.agent.token, this_agent, timeout=NAME_CHECK_SECONDS
        )

        def prepare() -> None:
            # The name first: an agent refused it has made no claim store.
            if name_check is not None:
                name_check.check_name()
            open_store_once()

        try:
            # One worker process: the tracker's lock is in-process; a few threads queue on it.
            status: int = server.serve(
                target="berth.tracker.agent.agent_api:AgentApp",
                load_app=worker.load,
                bind=config.agent.bind,
                workers=1,
                threads=4,
                access_log=settings.access_log,
                metrics=False,
                on_worker_exit=worker.exit,
                prepare=prepare,
            )
        except server.AddressInUse:
            print(
                f"berth agent: cannot listen on {config.agent.bind}: Address already in use by another process; "
                "stop it or choose another --bind.",
                file=sys.stderr,
            )
            return 1
        except (HostNameTaken, StoreError) as e:
            print(f"berth agent: {e}", file=sys.stderr)
            return 1
        return status
    finally:
        lock.close()
