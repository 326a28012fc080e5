"""``berth stress`` at CI size: racing claimers against a real multi-worker server, with and without
faults, on SQLite and PostgreSQL; then the audit's own logic on hand-made logs (it must catch what it
claims to catch)."""

from __future__ import annotations

import uuid

import pgserver
import pytest

from berth.cli import stress

# 6 claimer processes for ~4 s.  The plain run and the two server faults of a backend share one
# server (each run builds providers of its own; kill-server restarts it on the same port), which
# keeps the file within ~90 s on two cores.
CI = dict(concurrency=6, seconds=4.0, providers=12, seed=20261122)
SERVER_FAULTS = ["none", "kill-worker", "kill-server"]  # in this order: kill-server last


@pytest.fixture(scope="module")
def sqlite_server(tmp_path_factory):
    # 4 workers: SQLite's single writer lock is contended.
    folder = tmp_path_factory.mktemp("stress-sqlite")
    server = stress.OwnServer(f"sqlite:///{folder / 'stress.sqlite'}", 4, str(folder))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def postgresql_server(postgres_server, tmp_path_factory):
    folder = tmp_path_factory.mktemp("stress-postgresql")
    server = stress.OwnServer(postgres_server.create_database(f"stress_{uuid.uuid4().hex[:10]}"), 3, str(folder))
    server.start()
    yield server
    server.stop()


def run_ci(fault: str = "none", **kwargs) -> stress.StressResult:
    return stress.run_stress(stress.StressConfig(fault=fault, **CI), **kwargs)


def assert_clean(result: stress.StressResult, fault: str) -> None:
    report = result.table() + "\n" + result.violation_report()
    assert result.violations == [], report
    assert result.http_500s == 0, report
    assert result.count("2xx", stress.KINDS) > 0, report  # the load did write
    if fault == "none":
        assert result.count("409", stress.KINDS) > 0, report  # ... and raced for the last units
    assert len(result.faults) == (0 if fault == "none" else 1), report


@pytest.mark.parametrize("fault", SERVER_FAULTS)
def test_stress_sqlite(fault, sqlite_server):
    assert_clean(run_ci(fault, server=sqlite_server), fault)


@pytest.mark.parametrize("fault", SERVER_FAULTS)
def test_stress_postgresql(fault, postgresql_server):
    assert_clean(run_ci(fault, server=postgresql_server), fault)


def test_stress_postgresql_restart(tmp_path):
    # A PostgreSQL of its own: restarting the session's one would break the tests sharing it.
    pg = pgserver.start_postgres()
    server = stress.OwnServer(pg.create_database("stress"), 3, str(tmp_path))
    try:
        server.start()
        result = run_ci("restart-postgres", server=server, postgres=pg)
    finally:
        server.stop()
        pg.stop()
    assert_clean(result, "restart-postgres")


# --------------------------------------------------------------------------------------------------
# The audit itself, on logs and provider views made by hand.

A, B, M = (
    "aaaaaaaa-0000-4000-8000-000000000001",
    "bbbbbbbb-0000-4000-8000-000000000002",
    "cccccccc-0000-4000-8000-000000000003",
)
HOST1, HOST2 = "11111111-0000-4000-8000-000000000001", "22222222-0000-4000-8000-000000000002"
S1 = ((HOST1, "VCPU", 2),)
S2 = ((HOST2, "VCPU", 1),)


def write(seq, kind, outcome, changes):
    return ("write", seq, float(seq), kind, outcome, changes)


def observe(seq, seen):
    return ("observe", seq, float(seq), seen)


def kinds(events, actual):
    violations, _ = stress.replay(0, events, actual)
    return [v["what"] for v in violations]


def test_replay_accepts_what_the_log_allows():
    events = [
        write(1, "create", "ack", {A: S1}),
        write(2, "move", "ack", {A: S2, M: S1}),
        write(3, "delete", "ack", {M: ()}),
        write(4, "create", "refused", {B: S1}),
    ]
    assert kinds(events, {A: S2}) == []


def test_replay_catches_a_lost_acknowledged_write():
    events = [write(1, "create", "ack", {A: S1})]
    assert kinds(events, {}) == ["final state contradicts the log"]


def test_replay_catches_a_refused_write_that_was_applied():
    events = [write(1, "create", "ack", {A: S1}), write(2, "replace", "refused", {A: S2})]
    assert kinds(events, {A: S2}) == ["final state contradicts the log"]
    assert kinds(events + [observe(3, {A: S2})], {A: S2}) == ["read-back contradicts the log"]


def test_replay_allows_either_side_of_an_uncertain_write_but_never_a_mix():
    events = [write(1, "create", "ack", {A: S1}), write(2, "move", "uncertain", {A: S2, M: S1})]
    assert kinds(events, {A: S1}) == []  # not applied
    assert kinds(events, {A: S2, M: S1}) == []  # applied as a whole
    assert kinds(events, {A: S2}) == ["final state contradicts the log"]  # half of it
    # After a read-back the claimer's next acknowledged write is what counts.
    events += [observe(3, {A: S2, M: S1}), write(4, "delete", "ack", {M: ()})]
    assert kinds(events, {A: S2}) == []
    assert kinds(events, {A: S2, M: S1}) == ["final state contradicts the log"]


class FakeApi:
    def __init__(self, views):
        self.views = views

    def get_retrying(self, path):
        rp, what = path.split("/")[2:4]
        return {what: self.views[rp][what]}


def test_provider_audit_catches_overcommit_and_usage_drift():
    layout = {"all": [HOST1, HOST2], "names": {HOST1: "host-1", HOST2: "host-2"}}
    views = {
        HOST1: {
            "inventories": {"VCPU": {"total": 4, "reserved": 1, "allocation_ratio": 1.0}},
            "usages": {"VCPU": 4},
            "allocations": {A: {"resources": {"VCPU": 4}}},
        },
        HOST2: {
            "inventories": {"VCPU": {"total": 4, "reserved": 0, "allocation_ratio": 2.0}},
            "usages": {"VCPU": 3},
            "allocations": {B: {"resources": {"VCPU": 2}}},
        },
    }
    holdings, violations = stress.audit_providers(FakeApi(views), layout)
    assert sorted(v["what"] for v in violations) == ["over capacity", "usage mismatch"]
    assert holdings == {A: ((HOST1, "VCPU", 4),), B: ((HOST2, "VCPU", 2),)}


def test_error_body_format():
    class R:
        def __init__(self, status, body, ctype="application/json"):
            self.status_code, self._body, self.headers = status, body, {"content-type": ctype}

        def json(self):
            import json

            return json.loads(self._body)

    good = '{"errors": [{"status": 409, "title": "Conflict", "detail": "x", "request_id": "r"}]}'
    assert stress.error_body_problem(R(409, good)) is None
    assert stress.error_body_problem(R(503, "<html>Service Unavailable</html>", "text/html"))
    assert stress.error_body_problem(R(409, '{"errors": [{"status": 409, "title": "Conflict"}]}'))
    assert stress.error_body_problem(R(500, good))  # status inside differs from the HTTP status
