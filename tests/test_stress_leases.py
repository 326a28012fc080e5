"""The stress audit of picks with a lease (berth/testbed/stress/leasing.py), on logs and answers
made by hand: a lease's expiry in the log's replay, a second release, and the checks of a lease
released before its expiry, long after it, or although it was confirmed.  The load itself runs
against a real server in tests/test_stress.py and under a PostgreSQL failover in
tests/test_failover.py."""

from __future__ import annotations

import datetime
import json
import threading
import time

from stresshelpers import kinds, observe, write

from berth.testbed.client import Response
from berth.testbed.stress.claimer import Claimer
from berth.testbed.stress.leasing import LATE_AFTER, summarise
from berth.testbed.stress.replay import replay
from berth.testbed.stress.runner import lease_summary

A = "aaaaaaaa-0000-4000-8000-000000000001"
HOST = "11111111-0000-4000-8000-000000000001"
S1 = ((HOST, "MEMORY_MB", 512), (HOST, "VCPU", 1))


def test_replay_lets_an_expired_lease_be_released_at_any_later_moment():
    events = [write(1, "pick", "ack", {A: S1}), write(2, "expiry", "expiry", {A: ()})]
    assert kinds(events, {A: S1}) == []  # not released yet
    assert kinds(events, {}) == []
    events += [observe(3, {A: S1}), observe(4, {A: S1}), observe(5, {A: ()})]  # held, held, released
    assert kinds(events, {}) == []


def test_replay_catches_a_release_before_the_expiry():
    events = [write(1, "pick", "ack", {A: S1}), observe(2, {A: ()})]
    assert kinds(events, {}) == ["read-back contradicts the log"]


def test_a_second_release_of_a_claim_made_again_is_counted_as_released_twice():
    events = [
        write(1, "pick", "ack", {A: S1}),
        write(2, "expiry", "expiry", {A: ()}),
        observe(3, {A: ()}),
        write(4, "create", "ack", {A: S1}),  # claimed again, without a lease
    ]
    assert kinds(events, {A: S1}) == []
    violations, _ = replay(0, events, {})  # a second release took the new claim away
    assert [v["what"] for v in violations] == ["final state contradicts the log"]
    record = {"consumer": A, "plan": "expire", "outcome": "expired", "reclaimed": True, "delay": 1.0}
    counts = lease_summary({0: {"leases": [record]}}, violations)
    assert counts["released twice"] == 1 and counts["expired"] == 1 and counts["max release delay"] == 1.0


def stamp(moment: float) -> str:
    return datetime.datetime.fromtimestamp(moment, datetime.UTC).replace(tzinfo=None).isoformat() + "Z"


# One claimer of a run with faults, on a layout of one host.
CLAIMER_ARGS = (
    0,
    "http://127.0.0.1:9",
    {"all": [HOST], "hosts": [HOST], "gpus": {}, "aggregate": "a", "sharing": None},
    1,
    "failover",
    threading.Event(),
    None,
    1.0,
)


class Scripted(Claimer):
    """A claimer whose requests get the answers a test chooses: (status, body) per request."""

    def __init__(self, answers):
        super().__init__(*CLAIMER_ARGS)
        self.answers = answers
        self.sent = []

    def request(self, row, method, path, body=None, expected=()):
        self.sent.append((method, path))
        status, payload = self.answers(method, path)
        r = Response(status, json.dumps(payload).encode() if payload is not None else b"")
        self.stats[(row, str(status))] += 1
        return ("2xx" if status < 300 else str(status)), r


def allocations(state):
    return {"allocations": {HOST: {"resources": {rc: n for _, rc, n in state}}}, "consumer_generation": 1}


def pick_answers(lease_seconds_from_now: float, held):
    """Answers for a pick of S1 whose lease expires that long from now (the database's clock is
    this process's), and whose allocations ``held()`` says are still there."""
    expires_at = time.time() + lease_seconds_from_now

    def answers(method, path):
        if path == "/berth/pick":
            return 200, {"allocation_request": {"allocations": {HOST: {"resources": dict((rc, n) for _, rc, n in S1)}}}}
        if path.startswith("/berth/leases/") and method == "GET":
            return 200, {"expires_at": stamp(expires_at), "expires_in": round(expires_at - time.time(), 3)}
        if path.startswith("/berth/leases/"):
            return 204, None  # confirm, release
        if path.startswith("/allocations/") and method == "GET":
            return 200, allocations(S1) if held() else {"allocations": {}}
        if path.startswith("/allocations/") and method == "PUT":
            return 204, None
        raise AssertionError(path)

    return answers


def run_plan(claimer: Scripted, plan: str) -> dict:
    claimer.rng.choice = lambda seq: plan if seq and seq[0] == "confirm" else seq[0]
    claimer.leases.pick()
    claimer.leases.drain()
    [record] = claimer.leases.records
    return record


def problems(claimer):
    return [p["what"] for p in claimer.problems]


def test_a_lease_left_to_expire_and_released_after_its_expiry_is_on_time():
    c = Scripted(None)
    c.answers = pick_answers(0.6, lambda: time.time() < expiry)
    expiry = time.time() + 0.8
    record = run_plan(c, "expire")
    assert problems(c) == [] and record["outcome"] == "expired" and record["reclaimed"]
    assert record["checked_before"] and record["delay"] < 1.0


def test_a_lease_released_before_its_expiry_is_reported():
    c = Scripted(pick_answers(0.8, lambda: False))
    record = run_plan(c, "expire")
    assert problems(c) == ["lease released early"] and record["early"]
    assert summarise(c.leases.records)["released early"] == 1


def test_a_lease_still_held_long_after_its_expiry_is_reported(monkeypatch):
    monkeypatch.setattr("berth.testbed.stress.leasing.LATE_AFTER", 0.5)
    c = Scripted(pick_answers(0.3, lambda: True))
    record = run_plan(c, "expire")
    assert problems(c) == ["lease released late"] and record["outcome"] == "late"
    assert LATE_AFTER > 0.5  # the run's own bound was left alone


def test_a_confirmed_lease_whose_allocations_go_is_reported(monkeypatch):
    monkeypatch.setattr("berth.testbed.stress.leasing.KEPT_AFTER", 0.1)
    c = Scripted(pick_answers(0.3, lambda: False))
    record = run_plan(c, "confirm")
    assert record["outcome"] == "confirmed" and problems(c) == ["confirmed lease released"]
    c = Scripted(pick_answers(0.3, lambda: True))
    record = run_plan(c, "confirm")
    assert problems(c) == [] and record["consumer"] in c.owned


def test_a_confirmation_refused_as_expired_before_the_expiry_is_reported():
    c = Scripted(None)
    base = pick_answers(5.0, lambda: False)

    def answers(method, path):
        if path.endswith("/confirm"):
            return 409, {"errors": [{"status": 409, "title": "Conflict", "detail": "", "code": "berth.lease.expired"}]}
        return base(method, path)

    c.answers = answers
    record = run_plan(c, "confirm")
    assert record["outcome"] == "confirm-expired" and problems(c) == ["lease released early"]


class ScriptedClient:
    """An HTTP client answering as a test chooses, so that the claimer's own judgement of each
    answer (``Claimer.request``) runs."""

    def __init__(self, answers):
        self.answers = answers

    def request(self, method, path, body=None):
        status, payload = self.answers(method, path)
        return Response(status, json.dumps(payload).encode() if payload is not None else b"")


def test_a_confirmation_answered_404_after_the_expiry_is_no_violation():
    # A failover outlasting the lease: the reaper released it before the confirmation arrived.
    base = pick_answers(-0.5, lambda: False)
    gone = {"errors": [{"status": 404, "title": "Not Found", "detail": "the lease expired", "code": "x"}]}

    def answers(method, path):
        return (404, gone) if path.endswith("/confirm") else base(method, path)

    c = Claimer(*CLAIMER_ARGS)
    c.client = ScriptedClient(answers)
    record = run_plan(c, "confirm")
    assert record["outcome"] == "confirm-expired" and problems(c) == []
    assert c.stats[("confirm", "other")] == 1


def test_an_unexpected_404_elsewhere_is_still_a_violation():
    c = Claimer(*CLAIMER_ARGS)
    c.client = ScriptedClient(lambda method, path: (404, {"errors": [{"status": 404, "title": "", "detail": ""}]}))
    c.request("delete", "DELETE", f"/allocations/{A}")
    assert problems(c) == ["unexpected HTTP 404"]
