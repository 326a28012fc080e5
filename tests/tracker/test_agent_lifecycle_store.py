"""An agent whose claim store was damaged (a disk that failed, a file truncated by a crash): ``berth
agent`` stops with one line naming the file and what to do, not a worker's traceback; done as it
says (the file moved aside), the agent starts again and its audit adopts the guests the host runs.
And a running agent whose service goes away for a while says so in one line per audit round."""

from __future__ import annotations

import os
import shutil
import time

import pytest
from agenthelpers import Agent
from livehelpers import LiveServer
from trackerhelpers import flavor, instance


def test_a_truncated_claim_store_stops_the_agent_with_one_line_and_moving_it_aside_recovers(
    placement_service, placement, tmp_path
):
    agent = Agent(placement_service.url, tmp_path)
    try:
        inst = instance(flavor(1, 512, 1))
        claim = agent.client.instance_claim(inst)
        agent.client.spawn_guest(inst.uuid, claim.claim_id)
        agent.stop()
        store = agent.state_dir / f"{agent.host}.sqlite"
        assert store.stat().st_size > 4096
        with open(store, "r+b") as f:
            f.truncate(1000)

        with pytest.raises(RuntimeError) as refused:
            agent.start()
        said = str(refused.value)
        assert agent.process.returncode != 0
        assert "Traceback" not in said, said
        assert f"the claim store {store} cannot be opened" in said and "move it aside" in said, said
        # Said once, by the agent before it starts any worker (each worker said it again).
        assert said.count("cannot be opened") == 1, said

        # Done as the line says: the store moved aside, its agent's id and guests left where they are.
        aside = tmp_path / "aside"
        aside.mkdir()
        shutil.move(str(store), str(aside / store.name))
        agent.start()
        report = agent.client.audit(heal=True)
        assert [f["kind"] for f in report["findings"]] == ["instance_without_claim"], report
        [adopted] = agent.client.claims_for_instance(inst.uuid)
        assert adopted.allocations == placement.consumer(inst.uuid).allocations
        assert agent.client.audit(heal=False)["consistent"]
        agent.client.delete_instance(inst.uuid)
        assert placement.consumer(inst.uuid).allocations == {}
    finally:
        log = agent.stop()
    assert "Traceback" not in log, log
    assert os.path.exists(agent.state_dir / f"{agent.host}.sqlite")


def test_the_service_away_for_a_while_is_one_line_per_audit_and_the_agent_goes_on(tmp_path):
    """The service restarted (or unreachable) under a running agent: each periodic audit that cannot
    reach it says so in one line, not a traceback, and the agent audits again once it is back."""
    service = LiveServer(f"sqlite:///{tmp_path / 'placement.sqlite'}", workers=1)
    agent = None
    try:
        agent = Agent(service.url, tmp_path, config={"audit": {"interval": 0.3}})
        service.server.kill_group()
        time.sleep(2.0)
        service.server.start(service.server.port)
        assert agent.client.audit(heal=False)["consistent"]
    finally:
        log = agent.stop() if agent is not None else ""
        service.stop()
    assert "periodic task failed" in log, log
    assert "Traceback" not in log, log
