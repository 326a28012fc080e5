"""Many simulated hosts in one process: a resource tracker per host (fake driver) behind one HTTP
server, each host's agent API under ``/hosts/<name>/``.

A thousand ``berth agent`` processes do not fit on two cores; the trackers do not need a process
each, only a lock, a claim store and a driver each, which is what they have here. The API is the
agent's own (``AgentApp``), so a conductor drives a pooled host exactly as it drives a real agent,
through ``AgentClient("http://pool/hosts/<name>")``.

    python -m berth.testbed.sim.cloud.hostpool POOL.json

where POOL.json is ``{"bind", "placement", "state_dir", "hosts": {name: tracker config}}``. The
server is the services' own (``berth.web.server``: Granian) with one worker (the trackers' locks
are in-process) and a few threads.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import orjson

from berth.clients.placement import PlacementClient
from berth.tracker.agent.agent_api import AgentApp
from berth.tracker.configuration.config import TrackerConfig
from berth.tracker.drivers import make_driver
from berth.tracker.tracker import ResourceTracker
from berth.web import server

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

LOG = logging.getLogger(__name__)

PREFIX = "/hosts/"
# Trackers reporting their hosts to the service at the same time, at start.
STARTING_AT_ONCE = 8


class HostPool:
    """The WSGI application: ``/hosts/<name>/<agent path>`` to that host's ``AgentApp``."""

    def __init__(self, apps: dict[str, AgentApp]):
        self.apps = apps

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path: str = environ.get("PATH_INFO", "")
        if path == "/":
            body = orjson.dumps({"hosts": len(self.apps)})
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        name, _, rest = path.removeprefix(PREFIX).partition("/")
        app = self.apps.get(name) if path.startswith(PREFIX) else None
        if app is None:
            start_response("404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", "9")])
            return [b"not found"]
        inner = dict(environ)
        inner["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + PREFIX + name
        inner["PATH_INFO"] = "/" + rest
        return app(inner, start_response)


def tracker_config(document: dict[str, Any], state_dir: str) -> TrackerConfig:
    config = TrackerConfig.from_dict(document)
    config.state_dir = state_dir
    return config


def start_trackers(spec: dict[str, Any]) -> tuple[list[ResourceTracker], HostPool]:
    """Every host's tracker, started (its tree reported, its interrupted operations finished)."""

    def start(item: tuple[str, dict[str, Any]]) -> ResourceTracker:
        name, document = item
        config = tracker_config(document, spec["state_dir"])
        placement = PlacementClient(spec["placement"])
        tracker = ResourceTracker(name, make_driver("fake", config), placement, config)
        tracker.start()
        return tracker

    with ThreadPoolExecutor(STARTING_AT_ONCE) as pool:
        trackers = list(pool.map(start, spec["hosts"].items()))
    apps = {t.host: AgentApp(t, driver_name="fake") for t in trackers}
    LOG.info("host pool: %d hosts started", len(apps))
    return trackers, HostPool(apps)


def serve(spec: dict[str, Any]) -> None:
    trackers: list[ResourceTracker] = []

    def load() -> HostPool:
        started, app = start_trackers(spec)
        trackers.extend(started)
        return app

    def close_trackers() -> None:
        for tracker in trackers:
            tracker.close()

    server.serve(
        target="berth.testbed.sim.cloud.hostpool:HostPool",
        load_app=load,
        bind=spec["bind"],
        workers=1,
        threads=int(spec.get("threads", 8)),
        metrics=False,
        on_worker_exit=close_trackers,
        # A thousand hosts' conductors and heartbeats connect at once.
        backlog=2048,
    )


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    with open(argv[1], "rb") as f:
        serve(orjson.loads(f.read()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
