"""Fixtures of the scheduler's tests that run against a real ``berth serve`` with compute agents.

The server is the module's own (its providers are only those the module's agents report), and the
agents are ``berth agent`` processes with the fake driver, as the tracker's tests start them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from livehelpers import LiveServer

# The agents are started by the tracker tests' helpers.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tracker"))


@pytest.fixture(scope="module")
def placement_service(tmp_path_factory):
    server = LiveServer(f"sqlite:///{tmp_path_factory.mktemp('scheduler') / 'placement.sqlite'}", workers=2)
    yield server
    log = server.stop()
    assert "Traceback" not in log, log
