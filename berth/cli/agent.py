"""``berth agent``: the resource tracker of one host, as a daemon.

    berth agent --host $(hostname) --placement http://127.0.0.1:8778 --driver linux [--config FILE]

It reports the host to Placement, finishes whatever a crash interrupted, runs the periodic audit, and
serves the tracker's claim operations over HTTP (see berth/tracker/agent_api.py).
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import logging
import os
import socket
import sys
import time
from dataclasses import replace

LOG = logging.getLogger("berth.agent")


def add_agent_arguments(parser) -> None:
    parser.add_argument(
        "--host",
        default=socket.gethostname(),
        help="the host's name, also its compute node provider's name (default: hostname)",
    )
    parser.add_argument(
        "--placement",
        default=os.environ.get("BERTH_PLACEMENT_URL", "http://127.0.0.1:8778"),
        help="the Placement service (default $BERTH_PLACEMENT_URL, else http://127.0.0.1:8778)",
    )
    parser.add_argument(
        "--placement-token",
        default=os.environ.get("BERTH_PLACEMENT_TOKEN", "admin"),
        help="X-Auth-Token for Placement (default $BERTH_PLACEMENT_TOKEN, else admin)",
    )
    parser.add_argument(
        "--driver",
        choices=("fake", "linux"),
        default="linux",
        help="linux: this machine; fake: a host made up from the config's fake section",
    )
    parser.add_argument("--config", default=None, help="YAML or TOML configuration file (docs/tracker.md)")
    parser.add_argument("--bind", default=None, help="address:port of the agent's API (default 127.0.0.1:8779)")
    parser.add_argument(
        "--state-dir", default=None, help="where the claim store lives (default /var/lib/berth/agent, or the config's)"
    )
    parser.add_argument("--instances-path", default=None, help="the instances directory (linux driver)")
    parser.add_argument(
        "--token",
        default=os.environ.get("BERTH_AGENT_TOKEN"),
        help="require this X-Auth-Token on the agent's API (default $BERTH_AGENT_TOKEN)",
    )
    parser.add_argument(
        "--audit-interval",
        type=float,
        default=None,
        help="seconds between audits (default 60; 0 disables the periodic task)",
    )
    parser.add_argument("--heal", action="store_true", default=None, help="let the audit heal what it finds")
    parser.add_argument("--once", action="store_true", help="report the host, run one audit, print it as JSON and exit")
    parser.add_argument("--access-log", action="store_true", help="log every API request")
    parser.add_argument(
        "--force-insecure", action="store_true", help="allow the API on a non-loopback address without --token"
    )


def load_config(args):
    from berth.tracker.config import TrackerConfig

    config = TrackerConfig.load(args.config) if args.config else TrackerConfig()
    if args.state_dir:
        config.state_dir = args.state_dir
    if args.instances_path:
        config.instances_path = args.instances_path
    if args.audit_interval is not None:
        config.audit = replace(config.audit, interval=args.audit_interval)
    if args.heal:
        config.audit = replace(config.audit, heal=True)
    if args.bind:
        config.agent = replace(config.agent, bind=args.bind)
    if args.token:
        config.agent = replace(config.agent, token=args.token)
    return config


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _wait_for_placement(client, seconds=30.0):
    from berth.tracker.placement_client import PlacementError

    deadline = time.monotonic() + seconds
    while True:
        try:
            return client.ping()
        except PlacementError as e:
            if time.monotonic() > deadline:
                raise
            LOG.info("waiting for Placement at %s (%s)", client.url, e.detail)
            time.sleep(1.0)


def _lock_state(path):
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


def run(args) -> int:
    from berth.tracker.agent_api import serve_agent
    from berth.tracker.config import ConfigError
    from berth.tracker.drivers import make_driver
    from berth.tracker.placement_client import PlacementClient, PlacementError
    from berth.tracker.provider_config import ProviderConfigError
    from berth.tracker.tracker import ResourceTracker

    try:
        config = load_config(args)
        driver = make_driver(args.driver, config)
        driver.provider_tree(args.host, config, config.provider_config)  # configuration errors show now
    except (ConfigError, ProviderConfigError, ValueError) as e:
        print(f"berth agent: {e}", file=sys.stderr)
        return 2
    bind_host = config.agent.bind.rsplit(":", 1)[0].strip("[]")
    if not config.agent.token and not _is_loopback(bind_host) and not args.force_insecure:
        print(
            f"berth agent: refusing to serve claims on {bind_host} without a token: anyone who can reach "
            "it could claim and free this host's resources. Set --token (or agent.token), bind to a "
            "loopback address, or pass --force-insecure.",
            file=sys.stderr,
        )
        return 2
    client = PlacementClient(args.placement, args.placement_token)
    try:
        _wait_for_placement(client)
    except PlacementError as e:
        print(f"berth agent: Placement at {args.placement} does not answer: {e.detail}", file=sys.stderr)
        return 1
    store_path = config.store_path(args.host)
    lock = _lock_state(store_path)

    def build_tracker():
        return ResourceTracker(args.host, driver, PlacementClient(args.placement, args.placement_token), config)

    try:
        if args.once:
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
        LOG.info(
            "agent for %s (%s driver) on %s, claims in %s, Placement at %s",
            args.host,
            args.driver,
            config.agent.bind,
            store_path,
            args.placement,
        )
        return serve_agent(
            bind=config.agent.bind,
            build_tracker=build_tracker,
            token=config.agent.token,
            driver_name=args.driver,
            audit_interval=config.audit.interval,
            access_log=args.access_log,
        )
    finally:
        lock.close()
