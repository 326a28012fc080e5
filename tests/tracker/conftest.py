"""Fixtures for the tracker's tests: one real ``berth serve`` for the session, hosts made on demand.

Every test names its hosts uniquely, so tests share the server without seeing each other's providers.
``assert_books_agree`` (trackerhelpers) is the check the tests run after each operation: Placement's allocations and
usages, the tracker's persisted claims (read back from the store file) and its capacity view agree.
"""

from __future__ import annotations

import uuid

import pytest
from livehelpers import LiveServer
from trackerhelpers import BASE_CONFIG, TOPOLOGY

from berth.clients.placement import PlacementClient
from berth.tracker import ResourceTracker, TrackerConfig
from berth.tracker.drivers.fake import FakeDriver


@pytest.fixture(scope="session")
def placement_service(tmp_path_factory):
    server = LiveServer(f"sqlite:///{tmp_path_factory.mktemp('placement') / 'placement.sqlite'}", workers=2)
    yield server
    log = server.stop()
    assert "Traceback" not in log, log


@pytest.fixture
def placement(placement_service):
    return PlacementClient(placement_service.url)


class Hosts:
    """Makes trackers for fake hosts (and restarts them) against the session's service."""

    def __init__(self, url, tmp_path):
        self.url = url
        self.tmp_path = tmp_path
        self.trackers = []

    def __call__(self, name=None, topology=None, *, start=True, driver=None, **config) -> ResourceTracker:
        name = name or f"host-{uuid.uuid4().hex[:8]}"
        settings = {**BASE_CONFIG, "state_dir": str(self.tmp_path / "state"), **config}
        tracker = ResourceTracker(
            name,
            driver or FakeDriver(topology or TOPOLOGY),
            PlacementClient(self.url),
            TrackerConfig.from_dict(settings),
        )
        if start:
            tracker.start()
        self.trackers.append(tracker)
        return tracker

    def restart(self, tracker, *, placement=None) -> ResourceTracker:
        """A new tracker on the same store file, driver and configuration (the old one is dropped)."""
        tracker.close()
        fresh = ResourceTracker(tracker.host, tracker.driver, placement or PlacementClient(self.url), tracker.config)
        fresh.start()
        self.trackers.append(fresh)
        return fresh

    def close(self):
        for tracker in self.trackers:
            tracker.close()


@pytest.fixture
def hosts(placement_service, tmp_path):
    made = Hosts(placement_service.url, tmp_path)
    yield made
    made.close()
