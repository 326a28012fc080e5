"""A real ``berth serve`` and three fake-driver agents per test module, and conductors on a journal.

``narrow-1`` and ``narrow-2`` have two NUMA cells of 2 CPUs (16 GiB each): Placement sees 4 VCPUs,
but their agents refuse a guest cell of 3. ``wide`` has one cell of 4 CPUs and 8 GiB. With the
scheduler's agent-reading filters off, a one-cell guest of 3 vCPUs is thus placed on a narrow host
first (the most free RAM) and refused there by its agent: the way to make a build reschedule.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest
from livehelpers import LiveServer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tracker"))

from agenthelpers import started_agents  # noqa: E402 - the tracker's helpers are on the path only from here
from conductorhelpers import HOSTS  # noqa: E402 - it imports the tracker's helpers

from berth.clients.placement import PlacementClient  # noqa: E402 - after the path, as above
from berth.conductor.conductor import Conductor  # noqa: E402 - after the path, as above
from berth.conductor.journal import Journal  # noqa: E402 - after the path, as above
from berth.conductor.runner import ConductorConfig  # noqa: E402 - after the path, as above
from berth.scheduler.request.flavor import SchedulerConfig  # noqa: E402 - after the path, as above
from berth.scheduler.settings import SelectionSettings  # noqa: E402 - after the path, as above


@pytest.fixture(scope="module")
def placement_service(tmp_path_factory):
    # Without the picks' board: these tests say which host the scheduler's weighing chooses, and a
    # board a refresh behind the books may still count a claim the test before freed (the servers'
    # own tests, tests/conductor_service, and the simulator run with it).
    url = f"sqlite:///{tmp_path_factory.mktemp('conductor') / 'placement.sqlite'}"
    server = LiveServer(url, workers=2, extra=["--no-pick-board"])
    yield server
    log = server.stop()
    assert "Traceback" not in log, log


@pytest.fixture(scope="module")
def cloud(placement_service, tmp_path_factory):
    hosts = {name: {"topology": topology} for name, topology in HOSTS.items()}
    with started_agents(placement_service.url, tmp_path_factory, hosts) as agents:
        yield agents


@pytest.fixture
def placement(placement_service):
    return PlacementClient(placement_service.url)


@pytest.fixture
def clients(cloud):
    return {name: agent.client for name, agent in cloud.items()}


class Conductors:
    """Conductors on one journal file; each is a new owner, as a restarted process would be."""

    def __init__(self, placement, clients, path):
        self.placement = placement
        self.clients = clients
        self.url = f"sqlite:///{path / 'journal.sqlite'}"
        self.made = []

    def __call__(
        self,
        *,
        hook=None,
        max_attempts=3,
        dead_after=60.0,
        agents=None,
        lease_seconds=600,
        settings=None,
        hosts_down=frozenset(),
    ) -> Conductor:
        """``hosts_down``: the hosts seen down (a set the test may change), as the conductors' host
        records would say."""
        conductor = Conductor(
            self.placement,
            Journal(self.url),
            agents=self.clients if agents is None else agents,
            scheduler_config=SchedulerConfig(hosts_down=hosts_down),
            settings=settings or SelectionSettings(enabled_filters=[]),
            config=ConductorConfig(
                max_attempts=max_attempts, dead_after=dead_after, heartbeat_interval=0.2, lease_seconds=lease_seconds
            ),
            hook=hook,
        )
        self.made.append(conductor)
        return conductor

    def close(self):
        for conductor in self.made:
            conductor.close()
            conductor.journal.close()


@pytest.fixture
def conductors(placement, clients, tmp_path):
    made = Conductors(placement, clients, tmp_path)
    yield made
    made.close()


@pytest.fixture
def instance_uuid():
    return str(uuid.uuid4())


@pytest.fixture(params=["sqlite", "postgresql"])
def journal_on_each_database(request, tmp_path):
    """A journal of its own, on a SQLite file and on a database of the tests' PostgreSQL server."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'journal.sqlite'}"
    else:
        url = request.getfixturevalue("postgres_server").create_database(f"journal_{uuid.uuid4().hex[:8]}")
    made = Journal(url)
    yield made
    made.close()
