"""A cloud for the conductors' live tests: a real ``berth serve``, two ``berth conductor`` processes on
one database, and three fake-driver agents that register with both conductors."""

from __future__ import annotations

import sys
from pathlib import Path

from livehelpers import LiveServer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tracker"))

from agenthelpers import Agent  # noqa: E402 - the tracker's helpers are on the path only from here

from berth.clients.conductor import ConductorClient  # noqa: E402 - after the path, as above
from berth.clients.placement import PlacementClient  # noqa: E402 - after the path, as above
from berth.testbed.services.conductor import ConductorProcess  # noqa: E402 - after the path, as above

# Heartbeats and deaths in seconds, short so that a test sees a host go down and a conductor's
# operations taken over within seconds.
FAST = ["--heartbeat-interval", "0.5", "--dead-after", "3", "--host-down-after", "3"]
TOPOLOGY = {"cells": [{"cpus": 4, "memory_mb": 8192}], "disk_gb": 100}
HOSTS = {"alpha": "zone-a", "beta": "zone-a", "gamma": "zone-b"}


def conductors_on(placement_url: str, database_url: str, folder: str, count: int = 2) -> list[ConductorProcess]:
    return [
        ConductorProcess(placement_url, database_url, folder, name=f"conductor-{i}", extra=FAST).start()
        for i in range(count)
    ]


class Cloud:
    def __init__(self, placement: LiveServer, conductors: list[ConductorProcess], agents: dict[str, Agent]):
        self.placement_server = placement
        self.conductors = conductors
        self.agents = agents
        self.placement = PlacementClient(placement.url)

    def client(self, index: int = 0, token: str = "admin") -> ConductorClient:
        return ConductorClient(self.conductors[index].url, token)


def start_cloud(database_url: str, tmp_path_factory) -> Cloud:
    placement = LiveServer(f"sqlite:///{tmp_path_factory.mktemp('placement') / 'placement.sqlite'}", workers=2)
    folder = str(tmp_path_factory.mktemp("conductors"))
    conductors = conductors_on(placement.url, database_url, folder)
    urls = ",".join(c.url for c in conductors)
    agents = {
        name: Agent(
            placement.url,
            tmp_path_factory.mktemp(name),
            name,
            topology=TOPOLOGY,
            extra=["--conductor", urls, "--zone", zone, "--heartbeat-interval", "0.5"],
        )
        for name, zone in HOSTS.items()
    }
    return Cloud(placement, conductors, agents)


def stop_cloud(cloud: Cloud) -> list[str]:
    logs = [agent.stop() for agent in cloud.agents.values()]
    for conductor in cloud.conductors:
        conductor.stop()
        logs.append(conductor.log_text())
    logs.append(cloud.placement_server.stop())
    return logs
