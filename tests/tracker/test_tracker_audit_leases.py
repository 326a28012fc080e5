"""The audit's heal leaves a build in flight alone: allocations under a live claim lease and with no
claim on the host yet (the scheduler claimed, the agent has not) are reported but kept; once the
lease is confirmed away or has expired, they are removed as before.

A ``berth serve`` of its own, whose lease reaper is off, so that only the agent's heal can free
anything here, and a real ``berth agent`` healing on request."""

from __future__ import annotations

import pytest
import requests
from agenthelpers import Agent
from livehelpers import LiveServer
from trackerhelpers import SMALL, flavor, new_uuid

from berth.clients.placement import PlacementClient
from berth.domain.host.request import InstanceSpec
from berth.tracker.auditing.audit import ALLOCATIONS_WITHOUT_CLAIM

pytestmark = pytest.mark.slow

HELD = {"VCPU": 1, "MEMORY_MB": 256}


@pytest.fixture(scope="module")
def unreaped_service(tmp_path_factory):
    with pytest.MonkeyPatch.context() as env:
        env.setenv("BERTH_LEASE_CHECK_INTERVAL", "0")  # no reaper: expired leases stay until released
        server = LiveServer(f"sqlite:///{tmp_path_factory.mktemp('leases') / 'placement.sqlite'}", workers=1)
    yield server
    log = server.stop()
    assert "Traceback" not in log, log


@pytest.fixture(scope="module")
def agent(unreaped_service, tmp_path_factory):
    started = Agent(
        unreaped_service.url, tmp_path_factory.mktemp("agent"), topology=SMALL, config={"audit": {"interval": 0}}
    )
    yield started
    log = started.stop()
    assert "Traceback" not in log, log


@pytest.fixture
def placement(unreaped_service):
    return PlacementClient(unreaped_service.url)


@pytest.fixture
def root(agent):
    return str(requests.get(agent.url + "/", timeout=10).json()["root_provider_uuid"])


def _lease(placement, consumer, seconds):
    placement.request("PUT", f"/berth/leases/{consumer}", {"expires_in": seconds})


def _confirm(placement, consumer):
    placement.request("POST", f"/berth/leases/{consumer}/confirm")


def _schedule(placement, consumer, root):
    """What the scheduler's claim leaves: the consumer's allocations, and no claim on the host."""
    placement.write_consumers(
        {
            consumer: {
                "allocations": {root: HELD},
                "generation": None,
                "project_id": "project-1",
                "user_id": "user-1",
                "consumer_type": "INSTANCE",
            }
        }
    )


def _without_claim(report, consumer):
    return [f for f in report["findings"] if f["kind"] == ALLOCATIONS_WITHOUT_CLAIM and f["consumer_uuid"] == consumer]


def test_a_leased_consumer_without_a_claim_is_kept_then_removed_once_confirmed(agent, placement, root):
    consumer = new_uuid()
    _lease(placement, consumer, 600)
    _schedule(placement, consumer, root)

    report = agent.client.audit(heal=True)
    [finding] = _without_claim(report, consumer)
    assert "healed" not in finding and "claim lease" in finding["detail"]
    assert [f["consumer_uuid"] for f in report["residual"] if f["kind"] == ALLOCATIONS_WITHOUT_CLAIM] == [consumer]
    assert placement.consumer(consumer).allocations == {root: HELD}

    # Confirmed without a claim here (no build should do that): nothing explains them any more.
    _confirm(placement, consumer)
    report = agent.client.audit(heal=True)
    assert [f["healed"] for f in _without_claim(report, consumer)] == ["removed"]
    assert placement.consumer(consumer).allocations == {}
    assert agent.client.audit(heal=False)["consistent"]


def test_an_expired_lease_no_longer_protects_its_allocations(agent, placement, root):
    consumer = new_uuid()
    _lease(placement, consumer, 0)  # expired at once, and never reaped by this service
    _schedule(placement, consumer, root)
    report = agent.client.audit(heal=True)
    assert [f["healed"] for f in _without_claim(report, consumer)] == ["removed"]
    assert placement.consumer(consumer).allocations == {}
    assert report["consistent"], report["residual"]


def test_allocations_never_leased_are_removed_as_before(agent, placement, root):
    consumer = new_uuid()
    _schedule(placement, consumer, root)
    report = agent.client.audit(heal=True)
    assert [f["healed"] for f in _without_claim(report, consumer)] == ["removed"]
    assert placement.consumer(consumer).allocations == {}


def test_a_build_in_flight_survives_the_heal_and_lands(agent, placement, root):
    """The scheduler's claim, the heal, then the agent's claim and the confirmation: the books agree."""
    instance = InstanceSpec(new_uuid(), flavor(1, 256), "project-1", "user-1")
    _lease(placement, instance.uuid, 600)
    _schedule(placement, instance.uuid, root)
    agent.client.audit(heal=True)
    assert placement.consumer(instance.uuid).allocations == {root: HELD}

    claim = agent.client.instance_claim(instance)
    _confirm(placement, instance.uuid)
    assert placement.consumer(instance.uuid).allocations == claim.allocations
    agent.client.spawn_guest(instance.uuid, claim.claim_id)
    report = agent.client.audit(heal=True)
    assert report["findings"] == [] and report["consistent"]
    agent.client.destroy_guest(instance.uuid)
    agent.client.delete_instance(instance.uuid)
    assert placement.consumer(instance.uuid).allocations == {}
