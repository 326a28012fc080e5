"""An agent's id and what its registration says of a host's name another agent holds, in process:
the id is made once beside the claim store and kept (a damaged file is refused, not replaced); the
registration carries it; the conductors' refusal of the name stops the agent's start with one line
saying where the other agent answers and what to do, and, later, is logged once while it lasts."""

from __future__ import annotations

import logging
import uuid

import pytest

from berth.clients.conductor import HOST_NAME_TAKEN, ConductorError
from berth.tracker.agent.identity import agent_id, agent_id_path
from berth.tracker.agent.registration import HostNameTaken, Registration
from berth.tracker.errors import StoreError

# What the conductors answer (their JSON error's detail: the status's explanation, then their words).
TAKEN = ConductorError(
    409,
    HOST_NAME_TAKEN,
    "There was a conflict when trying to complete your request.\n\n Host alpha is held by the agent at "
    "http://10.0.0.7:8779, whose last heartbeat was 0.4 s ago; another agent may take the name only once that one "
    "has been silent for 60 s (the host down).  ",
    "PUT",
    "/hosts/alpha",
)


class Conductors:
    """The conductors as the registration's client sees them: each call answers the next of ``answers``
    (an error raised, anything else returned), the last one for good."""

    def __init__(self, *answers: object):
        self.answers = list(answers)
        self.asked: list[tuple[str, str, object]] = []

    def request(self, method: str, path: str, body: object = None) -> object:
        self.asked.append((method, path, body))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


def _registration(conductors: Conductors, agent: str | None = None) -> Registration:
    return Registration(
        conductors,  # the one method of the client the registration calls: request
        "alpha",
        "http://10.0.0.8:8779",
        zone=None,
        agent_token=None,
        interval=10.0,
        agent_id=agent,
        host_setting="another --host name",
    )


def test_the_id_is_made_once_beside_the_claim_store_and_kept(tmp_path):
    store = str(tmp_path / "state" / "alpha.sqlite")
    made = agent_id(store)
    assert str(uuid.UUID(made)) == made
    assert agent_id(store) == made
    assert agent_id_path(store) == store + ".agent_id"
    assert (tmp_path / "state" / "alpha.sqlite.agent_id").read_text().strip() == made
    # Another claim store, another agent.
    assert agent_id(str(tmp_path / "elsewhere" / "alpha.sqlite")) != made


def test_a_damaged_id_is_refused_rather_than_made_again(tmp_path):
    store = str(tmp_path / "alpha.sqlite")
    (tmp_path / "alpha.sqlite.agent_id").write_text("half-written")
    with pytest.raises(StoreError, match=r"alpha\.sqlite\.agent_id holds 'half-written', not an agent's id"):
        agent_id(store)
    assert (tmp_path / "alpha.sqlite.agent_id").read_text() == "half-written"


def test_the_registration_carries_the_agents_id():
    conductors = Conductors({"host": {}})
    agent = str(uuid.uuid4())
    assert _registration(conductors, agent).beat()
    body = {"host": {"url": "http://10.0.0.8:8779", "zone": None, "agent_token": None, "agent_id": agent}}
    assert conductors.asked == [("PUT", "/hosts/alpha", body)]


def test_the_name_is_checked_at_start_with_the_registration_the_beats_make_but_not_made():
    conductors = Conductors(None)
    agent = str(uuid.uuid4())
    _registration(conductors, agent).check_name()
    body = {"host": {"url": "http://10.0.0.8:8779", "zone": None, "agent_token": None, "agent_id": agent}}
    assert conductors.asked == [("PUT", "/hosts/alpha?dry_run=1", body)]


def test_a_name_another_agent_holds_stops_the_start_saying_where_it_answers_and_what_to_do():
    with pytest.raises(HostNameTaken) as taken:
        _registration(Conductors(TAKEN)).check_name()
    said = str(taken.value)
    assert "\n" not in said
    assert said.startswith(
        "another agent already serves host alpha; stop it, or start this one under another --host name. "
        "The conductors say: Host alpha is held by the agent at http://10.0.0.7:8779, whose last heartbeat was "
        "0.4 s ago;"
    ), said
    assert "There was a conflict" not in said


def test_any_other_failure_of_the_first_registration_is_left_to_the_beats():
    for failure in (ConductorError(0, None, "no conductor answered"), ConductorError(401, None, "Unauthorized")):
        _registration(Conductors(failure)).check_name()  # no exception: the agent starts


def test_a_name_taken_later_is_logged_once_while_it_lasts_and_when_it_is_back(caplog):
    registration = _registration(Conductors({"host": {}}, TAKEN, TAKEN, TAKEN, {"host": {}}))
    with caplog.at_level(logging.INFO, logger="berth.tracker.agent.registration"):
        assert [registration.beat() for _ in range(5)] == [True, False, False, False, True]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith("another agent already serves host alpha") and "trying again every 10s" in lines[0]
    assert lines[1] == "the conductors took alpha's registration: the agent that held the name is seen down"
