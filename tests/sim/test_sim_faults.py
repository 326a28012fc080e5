"""The simulator's faults do what they say: a conflict storm's competing schedulers write onto the
hot hosts (moving their generations under the operations in flight) and leave nothing behind."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tracker"))

from answerdropper import AnswerDropper  # noqa: E402 - after the path, as above
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


def test_a_storm_write_whose_answer_is_lost_is_removed_all_the_same(tmp_path):
    """A write the service made and never answered (its worker killed mid-answer) is removed too:
    the storm's consumers are the simulator's, and must not be left on the hosts."""
    server = LiveServer(f"sqlite:///{tmp_path / 'storm.sqlite'}", workers=1)
    dropper = AnswerDropper(server.url)
    try:
        client = server.client()
        root = live_host(client, "hot", {"VCPU": 64, "MEMORY_MB": 65536})
        dropper.drop_next("PUT", "/allocations/*")
        assert compete(dropper.url, [root], seed=3, writes=3) == 2
        assert dropper.dropped and dropper.dropped[0][0] == "PUT"
        assert client.request("GET", f"/resource_providers/{root}/allocations").json()["allocations"] == {}
    finally:
        dropper.close()
        log = server.stop()
    assert "Traceback" not in log, log
