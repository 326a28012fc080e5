"""The simulator's faults do what they say: a conflict storm's competing schedulers write onto the
hot hosts (moving their generations under the operations in flight) and leave nothing behind."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from livehelpers import LiveServer, live_host  # noqa: E402 - after the path, as above

from berth.testbed.sim.cloud.faults import compete  # noqa: E402 - after the path, as above


def test_a_conflict_storms_writes_land_move_the_generations_and_leave_nothing(tmp_path):
    server = LiveServer(f"sqlite:///{tmp_path / 'storm.sqlite'}", workers=1)
    try:
        client = server.client()
        roots = [live_host(client, f"hot-{i}", {"VCPU": 64, "MEMORY_MB": 65536}) for i in range(2)]

        def generations() -> int:
            return sum(client.request("GET", f"/resource_providers/{r}").json()["generation"] for r in roots)

        before = generations()
        # Alone on the hosts, every write lands, and moves its host's generation.
        assert compete(server.url, roots, seed=7, writes=10) == 10
        assert generations() >= before + 10
        for root in roots:
            assert client.request("GET", f"/resource_providers/{root}/allocations").json()["allocations"] == {}
    finally:
        log = server.stop()
    assert "Traceback" not in log, log
