"""A conductor's wrong word, sent to two ``berth agent`` processes over HTTP: a move's source given a
migration id that is no consumer's uuid, a clean-up after an evacuation asked for an instance that
never left. Each is refused with the agent's status and code, and no claim nor allocation is lost."""

from __future__ import annotations

import pytest
import requests
from agenthelpers import TOKEN, assert_remote_books_agree, two_agents
from trackerhelpers import flavor, instance, new_uuid

from berth.clients import agent_error_codes
from berth.clients.errors import ClaimError, InvalidRequest
from berth.domain.host.records import ACTIVE
from berth.tracker.moving import moves


@pytest.fixture
def agents(placement_service, tmp_path):
    # Agents of their own for each test: what one test's refusal failed to keep out of the books
    # is not another test's failure.
    with two_agents(placement_service.url, tmp_path) as pair:
        yield pair


def _post(agent, path, body):
    return requests.post(agent.url + path, json=body, headers={"X-Auth-Token": TOKEN}, timeout=30)


@pytest.mark.parametrize(
    "migration",
    ["not-a-uuid", new_uuid().upper(), new_uuid().replace("-", "")],
    ids=["not a uuid", "upper-case", "undashed"],
)
def test_the_source_refuses_a_migration_id_that_is_not_a_uuid_as_the_books_write_it(agents, placement, migration):
    source, destination = agents
    inst = instance(flavor(1, 512, 1))
    claim = source.client.instance_claim(inst)
    answer = _post(source, f"/migrations/{migration}/source", {"instance_uuid": inst.uuid})
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == agent_error_codes.CLAIM_INVALID_REQUEST
    assert "is not a uuid" in answer.json()["error"]["message"]
    with pytest.raises(InvalidRequest, match="is not a uuid"):
        source.client.begin_move_out(inst.uuid, migration)
    # The claim is the instance's as before, and it can still move under a migration of its own.
    assert [c.state for c in source.client.claims_for_instance(inst.uuid)] == [ACTIVE]
    assert placement.consumer(inst.uuid).allocations == claim.allocations
    assert_remote_books_agree(placement, source.client, destination.client)
    own = new_uuid()
    assert source.client.begin_move_out(inst.uuid, own).migration_uuid == own
    assert source.client.revert_migration(own) == ["restored"]
    source.client.delete_instance(inst.uuid)


def test_a_clean_up_after_an_evacuation_is_refused_for_an_instance_that_never_left(agents, placement):
    source, destination = agents
    inst = instance(flavor(1, 512, 1))
    claim = source.client.instance_claim(inst)
    answer = _post(source, f"/migrations/{new_uuid()}/cleanup_evacuated", {"instance_uuid": inst.uuid})
    assert answer.status_code == 409
    assert answer.json()["error"]["code"] == agent_error_codes.CLAIM_REFUSED
    with pytest.raises(ClaimError, match="was not evacuated"):
        source.client.cleanup_evacuated(inst.uuid, new_uuid())
    assert [c.state for c in source.client.claims_for_instance(inst.uuid)] == [ACTIVE]
    assert placement.consumer(inst.uuid).allocations == claim.allocations
    assert_remote_books_agree(placement, source.client, destination.client)
    source.client.delete_instance(inst.uuid)


def test_a_clean_up_after_a_real_evacuation_still_drops_the_source_claim(agents, placement):
    source, destination = agents
    inst = instance(flavor(1, 512, 1))
    source.client.instance_claim(inst)
    migration = new_uuid()
    moves.evacuate(destination.client, inst, migration, source.host)
    destination.client.confirm_migration(migration)
    # The source's own audit may clean up first (it finds the instance gone elsewhere): either way
    # nothing of the instance is left on the source, and its migration holds nothing.
    assert source.client.cleanup_evacuated(inst.uuid, migration) in (["cleaned"], [])
    assert source.client.claims_for_instance(inst.uuid) == []
    assert placement.consumer(migration).allocations == {}
    assert_remote_books_agree(placement, source.client, destination.client)
    destination.client.delete_instance(inst.uuid)
