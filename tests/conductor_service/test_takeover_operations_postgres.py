"""Some of test_takeover_operations.py's take-overs with the two conductors on PostgreSQL: a build,
a cold migration confirmed, a live migration and a shelve offload, the conductor that owns each
killed in the middle of it."""

from __future__ import annotations

import pytest
import test_takeover_operations as takeover
from cloudhelpers import start_cloud, stop_cloud
from test_takeover_operations import conductors_back, flavors  # noqa: F401 - this module's cloud's too

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cloud(postgres_server, tmp_path_factory):
    made = start_cloud(postgres_server.create_database("conductors_takeover"), tmp_path_factory)
    yield made
    for log in stop_cloud(made):
        assert "Traceback" not in log, log


@pytest.mark.parametrize("point", ["answered", "step", "agent_answered"])
def test_build(cloud, point):
    takeover.test_build(cloud, point)


@pytest.mark.parametrize("point", ["step", "agent_answered", "paused"])
@pytest.mark.parametrize("move", takeover.MOVES[::2], ids=["migrate-confirm", "live"])
def test_move(cloud, move, point):
    takeover.test_move(cloud, move, point)


@pytest.mark.parametrize("point", ["answered", "paused", "paused_long"])
def test_shelve_offload(cloud, point):
    takeover.test_lifecycle(cloud, (["shelve"], "shelveOffload", "SHELVED_OFFLOADED"), point)
