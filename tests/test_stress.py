"""``berth stress`` at CI size: racing claimers against a real multi-worker server, with and without
faults, on SQLite and PostgreSQL; then the audit's own logic on hand-made logs (it must catch what it
claims to catch)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import click
import pytest
from stresshelpers import kinds, observe, write

from berth.cli.load.stress import stress_command
from berth.testbed.client import Client, RequestFailed
from berth.testbed.loopback import free_port
from berth.testbed.services.postgres import start_postgres
from berth.testbed.services.server import Server
from berth.testbed.stress.audit import audit_providers
from berth.testbed.stress.config import KINDS, StressConfig
from berth.testbed.stress.responses import error_body_problem
from berth.testbed.stress.result import StressResult
from berth.testbed.stress.runner import run_stress

# 6 claimer processes for ~4 s.  The plain run and the two server faults of a backend share one
# server (each run builds providers of its own; kill-server restarts it on the same port), which
# keeps the file within ~90 s on two cores.
CI = dict(concurrency=6, seconds=4.0, providers=12, seed=20261122)
SERVER_FAULTS = ["none", "kill-worker", "kill-server"]  # in this order: kill-server last


@pytest.fixture(scope="module")
def sqlite_server(tmp_path_factory):
    # 4 workers: SQLite's single writer lock is contended.
    folder = tmp_path_factory.mktemp("stress-sqlite")
    server = Server(f"sqlite:///{folder / 'stress.sqlite'}", 4, str(folder))
    server.start()
    yield server
    server.stop(grace=1.0)


@pytest.fixture(scope="module")
def postgresql_server(postgres_server, tmp_path_factory):
    folder = tmp_path_factory.mktemp("stress-postgresql")
    server = Server(postgres_server.create_database(f"stress_{uuid.uuid4().hex[:10]}"), 3, str(folder))
    server.start()
    yield server
    server.stop(grace=1.0)


def run_ci(fault: str = "none", **kwargs) -> StressResult:
    return run_stress(StressConfig(fault=fault, **CI), **kwargs)


def assert_clean(result: StressResult, fault: str) -> None:
    report = result.table() + "\n" + result.violation_report()
    assert result.violations == [], report
    assert result.http_500s == 0, report
    assert result.count("2xx", KINDS) > 0, report  # the load did write
    if fault == "none":
        assert result.count("409", KINDS) > 0, report  # ... and raced for the last units
    assert len(result.faults) == (0 if fault == "none" else 1), report


@pytest.mark.parametrize("fault", SERVER_FAULTS)
def test_stress_sqlite(fault, sqlite_server):
    assert_clean(run_ci(fault, server=sqlite_server), fault)


@pytest.mark.parametrize("fault", SERVER_FAULTS)
def test_stress_postgresql(fault, postgresql_server):
    assert_clean(run_ci(fault, server=postgresql_server), fault)


@pytest.mark.slow
def test_stress_postgresql_restart(tmp_path):
    # A PostgreSQL of its own: restarting the session's one would break the tests sharing it.
    pg = start_postgres()
    server = Server(pg.create_database("stress"), 3, str(tmp_path))
    try:
        server.start()
        result = run_ci("restart-postgres", server=server, postgres=pg)
    finally:
        server.stop(grace=1.0)
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
    holdings, violations = audit_providers(FakeApi(views), layout)
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
    assert error_body_problem(R(409, good)) is None
    assert error_body_problem(R(503, "<html>Service Unavailable</html>", "text/html"))
    assert error_body_problem(R(409, '{"errors": [{"status": 409, "title": "Conflict"}]}'))
    assert error_body_problem(R(500, good))  # status inside differs from the HTTP status


# --------------------------------------------------------------------------------------------------
# The command itself: its options, its table and its JSON keys (docs/reliability.md).

DOCS = Path(__file__).resolve().parent.parent / "docs" / "reliability.md"
OPTIONS = {
    "--url",
    "--database",
    "--workers",
    "--servers",
    "--postgres-nodes",
    "--picks",
    "--concurrency",
    "--seconds",
    "--operations",
    "--providers",
    "--fault",
    "--fault-count",
    "--down-seconds",
    "--server-pid",
    "--seed",
    "--keep",
    "--json",
    "--server-log",
}
JSON_KEYS = {
    "backend",
    "workers",
    "concurrency",
    "fault",
    "seconds_planned",
    "elapsed",
    "stats",
    "leases",
    "faults",
    "outages",
    "violations",
    "providers",
    "consumers_seen",
    "consumers_present",
    "notes",
    "server_tracebacks",
    "server_exceptions",
    "server_log_excerpt",
    "requests",
    "writes",
    "http_500s",
    "lost_writes",
    "duplicates",
    "over_commits",
}


def test_options_are_those_the_docs_name():
    options = {o for param in stress_command.params for o in param.opts if o.startswith("--")}
    assert options == OPTIONS
    assert options <= set(re.findall(r"--[a-z][a-z-]*", DOCS.read_text()))
    args = StressConfig(**stress_command.make_context("stress", ["-c", "3", "--fault", "kill-worker"]).params)
    assert (args.concurrency, args.fault, args.seconds, args.providers, args.workers) == (3, "kill-worker", 30.0, 20, 4)
    assert (args.operations, args.keep, args.down_seconds, args.seed) == (None, False, 1.0, None)
    assert StressConfig(**stress_command.make_context("stress", ["--keep", "--seed", "9"]).params).keep is True
    for malformed in (["--fault", "unplug-the-cable"], ["-c", "0"], ["--seconds", "0"], ["--seed", "x"]):
        with pytest.raises(click.UsageError):
            stress_command.make_context("stress", malformed)


@pytest.mark.slow
def test_command_prints_its_table_and_writes_its_json(tmp_path):
    report = tmp_path / "stress.json"
    done = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "stress", "-c", "2", "--operations", "8", "--providers", "3"]
        + ["--workers", "1", "--seed", "7", "--database", "sqlite", "--json", str(report)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "berth stress: sqlite, 1 workers, 2 claimers, fault none, 5 providers"
    header = (
        "operation        total           2xx           409           503  refused-conn     lost-conn         other"
    )
    assert lines[2] == header
    rows = [*KINDS, "candidates", "providers", "read-back", "lease-read"]
    assert [line.split()[0] for line in lines[3 : 3 + len(rows)]] == rows
    assert lines[3 + len(rows)] == "-" * len(header) and lines[4 + len(rows)].startswith("all requests")
    assert "violations: 0" in lines
    document = json.loads(report.read_text())
    assert set(document) == JSON_KEYS
    assert document["violations"] == [] and document["requests"] > 0 and document["seconds_planned"] is None


# --------------------------------------------------------------------------------------------------
# The client's word on a failed request, which decides between "refused" and "uncertain" writes.


@pytest.mark.parametrize("at_most_once", [False, True], ids=["curl", "requests"])
def test_a_refused_connection_was_not_sent(at_most_once):
    client = Client(f"http://127.0.0.1:{free_port()}", timeout=5.0, at_most_once=at_most_once)
    with pytest.raises(RequestFailed) as failed:
        client.request("PUT", "/allocations/x", {"allocations": {}})
    client.close()
    assert failed.value.sent is False


@pytest.mark.parametrize("at_most_once", [False, True], ids=["curl", "requests"])
def test_a_connection_closed_after_the_request_may_have_been_processed(at_most_once):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    received = []

    def hang_up():
        connection, _ = listener.accept()
        received.append(connection.recv(65536))
        connection.close()

    thread = threading.Thread(target=hang_up)
    thread.start()
    client = Client(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout=5.0, at_most_once=at_most_once)
    try:
        with pytest.raises(RequestFailed) as failed:
            client.request("PUT", "/allocations/x", {"allocations": {}})
    finally:
        client.close()
        thread.join(timeout=10)
        listener.close()
    assert received and received[0].startswith(b"PUT /allocations/x")
    assert failed.value.sent is True


def test_outages_are_the_longest_gap_between_acknowledged_writes_around_each_fault():
    from berth.testbed.stress.runner import outages

    def ack(at):
        return ("write", 0, at, "create", "ack", {})

    refused = ("write", 0, 12.0, "create", "refused", {})
    # Answers at 9.9 and 10.1 straddle the kill at 10.0 (a commit just before it); then nothing until
    # 13.5.  The second fault, at 20.0, is never followed by an acknowledgement.
    collected = {0: {"events": [ack(9.0), ack(9.9), ack(10.1), refused, ack(13.5), ack(14.0)]}}
    collected[1] = {"events": [ack(10.05), ack(16.0), ack(18.0), ack(19.9)]}
    assert outages([{"wall": 10.0}, {"wall": 20.0}], collected) == [pytest.approx(3.4), None]
