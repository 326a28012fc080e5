"""``berth stress``: concurrent claimers racing for the last units, with faults, then an audit.

C claimer processes (each with its own ``requests.Session``) loop against one server.  Each round
reads allocation candidates (or the provider list) and then, at random,

* **create**: ``PUT /allocations/{new consumer}`` with ``consumer_generation: null``;
* **replace**: ``PUT /allocations/{consumer}`` with the generation it knows;
* **move**: ``POST /allocations`` giving the consumer a new destination (or nothing: *move-away*) and
  a new *migration* consumer the old allocations, both with consumer generations;
* **delete**: ``DELETE /allocations/{consumer}``.

Every write is logged with the exact allocations it set and its outcome: acknowledged (2xx),
refused (409, 503, or a connection refused before the request was sent) or uncertain (the connection
was lost after the request was sent, a timeout, a 500).  After an uncertain write, an unexpected
consumer generation conflict or now and then after an acknowledged write, the claimer reads its
consumers back; that observation must match one of the states the log allows.

At the end the audit reads everything back over HTTP and checks that

* no provider is over capacity: ``(total - reserved) * allocation_ratio >= used`` for every class;
* each provider's usages equal the sum of ``GET /resource_providers/{uuid}/allocations``;
* every consumer holds exactly what its last acknowledged write set (absent after a delete or a
  move-away); after an uncertain write either the old or the new state of *all* the consumers it
  named, never a mix; a refused write changed nothing; no unknown consumer holds anything;
* ``GET /allocations/{consumer}`` agrees with the providers' lists;
* no response was a 5xx other than 503, an unexpected 4xx, or an error body outside Placement's
  ``{"errors": [{"status", "title", "detail", ...}]}``; without a fault, no 503 and no lost
  connection either.

Faults (``--fault``): ``kill-worker`` (SIGKILL to one server worker, found as a child of the server
process through /proc), ``kill-server`` (SIGKILL to the server's whole process group, then the same
command again on the same port and database), ``restart-postgres`` (``pg_ctl stop -m fast`` and start
of the throwaway PostgreSQL this run started).

Only the standard library and ``requests`` are used; the service's own code is not imported.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import queue
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
import uuid as uuidlib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import requests

from berth.cli import harness
from berth.domain import error_codes

TOKEN = "admin"
VERSION = "1.39"
CREATE_VERSION = "1.20"
REQUEST_TIMEOUT = 60.0
SERVER_START_TIMEOUT = 90.0
RESOLVE_GRACE = 60.0  # how long a claimer keeps trying to read back an uncertain write
MAX_WORLDS = 256
AUDIT_THREADS = 4
ABSENT_SAMPLE = 100  # consumers that should hold nothing, read back one by one at the end
FAULTS = ("none", "kill-worker", "kill-server", "restart-postgres")
KINDS = ("create", "replace", "move", "delete")
READS = ("candidates", "providers", "read-back")
OUTCOME_COLUMNS = ("2xx", "409", "503", "refused-conn", "lost-conn", "other")

SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"
PROJECT = "5eeeeeee-0000-4000-8000-000000000001"
USER = "5eeeeeee-0000-4000-8000-000000000002"

# Small hosts, so that claimers race for the last units.  Odd hosts exercise reserved and the ratio.
HOST_INVENTORY_EVEN = {"VCPU": {"total": 8}, "MEMORY_MB": {"total": 8192}}
HOST_INVENTORY_ODD = {"VCPU": {"total": 4, "allocation_ratio": 2.0}, "MEMORY_MB": {"total": 8704, "reserved": 512}}
GPU_INVENTORY = {"VGPU": {"total": 2}}
GPU_EVERY = 3  # every third host has a nested child with VGPUs
SHARING_DISK_GB = 400


class StressError(Exception):
    """A failure of the setup that ends the run with a message instead of a traceback."""


def log(message: str) -> None:
    print(f"[stress {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------------
# Configuration


@dataclass
class StressConfig:
    url: str | None = None  # a running server; else one is started
    database: str | None = None  # for a started server: sqlite (default), postgresql, or a URL
    workers: int = 4
    concurrency: int = 8
    seconds: float = 30.0
    operations: int | None = None  # per claimer, instead of --seconds
    providers: int = 20
    fault: str = "none"
    fault_count: int = 1
    down_seconds: float = 1.0  # kill-server, restart-postgres: how long to stay down
    server_pid: int | None = None  # kill-worker against --url: the server's master process
    seed: int | None = None
    keep: bool = False  # with --url: leave the providers and consumers behind
    json: str | None = None
    server_log: str | None = None  # copy the started server's log there


def add_stress_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run concurrent claimer processes that race for the last units of small providers, "
        "optionally inject a fault, then audit every provider and consumer over HTTP. Exits "
        "non-zero on any violation (over-commit, lost or partial write, 500, non-JSON error). "
        "See docs/reliability.md."
    )
    parser.add_argument("--url", default=None, help="base URL of a running server (loopback only); default: start one")
    parser.add_argument(
        "--database",
        default=None,
        help="database of the server this run starts: 'sqlite' (default, a fresh "
        "file), 'postgresql' (a throwaway PostgreSQL, needs tests/pgserver.py) "
        "or a SQLAlchemy URL",
    )
    parser.add_argument(
        "--workers",
        type=harness.positive_int,
        default=4,
        help="worker processes of the server this run starts (default 4)",
    )
    parser.add_argument(
        "--concurrency", "-c", type=harness.positive_int, default=8, help="concurrent claimer processes (default 8)"
    )
    parser.add_argument(
        "--seconds", type=harness.positive_float, default=30.0, help="duration of the load (default 30)"
    )
    parser.add_argument(
        "--operations", type=harness.positive_int, default=None, help="rounds per claimer instead of a duration"
    )
    parser.add_argument(
        "--providers",
        type=harness.positive_int,
        default=20,
        help="compute hosts (default 20), plus nested GPU children and one sharing DISK_GB provider",
    )
    parser.add_argument("--fault", choices=FAULTS, default="none", help="fault injected during the load (default none)")
    parser.add_argument(
        "--fault-count",
        type=harness.positive_int,
        default=1,
        help="how many times, evenly spread over the run (default 1)",
    )
    parser.add_argument(
        "--down-seconds",
        type=float,
        default=1.0,
        help="kill-server / restart-postgres: time the server stays down (default 1)",
    )
    parser.add_argument(
        "--server-pid",
        type=int,
        default=None,
        help="with --url and --fault kill-worker: pid of the server's master process",
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    parser.add_argument(
        "--keep", action="store_true", help="with --url: leave the providers and consumers of the run behind"
    )
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the summary as JSON")
    parser.add_argument(
        "--server-log", default=None, metavar="FILE", help="copy the log of the server this run started to FILE"
    )


def config_from_args(args) -> StressConfig:
    return StressConfig(
        url=args.url,
        database=args.database,
        workers=args.workers,
        concurrency=args.concurrency,
        seconds=args.seconds,
        operations=args.operations,
        providers=args.providers,
        fault=args.fault,
        fault_count=args.fault_count,
        down_seconds=args.down_seconds,
        server_pid=args.server_pid,
        seed=args.seed,
        keep=args.keep,
        json=args.json,
        server_log=args.server_log,
    )


def run(args) -> int:
    """Entry point of ``berth stress``."""
    try:
        result = run_stress(config_from_args(args))
    except StressError as e:
        log(f"error: {e}")
        return 2
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    print(result.table(), flush=True)
    if result.violations:
        print(result.violation_report(), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result.as_dict(), f, indent=2)
    return 0 if result.ok else 1


# --------------------------------------------------------------------------------------------------
# HTTP helpers


def error_body_problem(response: requests.Response) -> str | None:
    """None when an error response carries Placement's JSON error body, else what is wrong."""
    try:
        body = response.json()
    except ValueError:
        return f"not JSON (content-type {response.headers.get('content-type')!r})"
    errors = body.get("errors") if isinstance(body, dict) else None
    if not isinstance(errors, list) or not errors:
        return "no 'errors' list"
    for error in errors:
        if not isinstance(error, dict) or not {"status", "title", "detail"} <= set(error):
            return "an error lacks status/title/detail"
        if error["status"] != response.status_code:
            return f"error status {error['status']!r} differs from HTTP {response.status_code}"
    return None


def error_code(response: requests.Response) -> str | None:
    with contextlib.suppress(Exception):
        return response.json()["errors"][0].get("code")
    return None


# State of a consumer: a sorted tuple of (provider, class, amount); () when it holds nothing.


def freeze(allocations: dict) -> tuple:
    items = []
    for rp, entry in allocations.items():
        resources = entry.get("resources", entry) if isinstance(entry, dict) else {}
        for rc, amount in resources.items():
            if amount:
                items.append((rp, rc, int(amount)))
    return tuple(sorted(items))


def thaw(state: tuple) -> dict:
    out: dict = {}
    for rp, rc, amount in state:
        out.setdefault(rp, {"resources": {}})["resources"][rc] = amount
    return out


def totals(state: tuple) -> dict:
    out = Counter()
    for _, rc, amount in state:
        out[rc] += amount
    return dict(out)


def show(state) -> str:
    if state is None:
        return "?"
    if not state:
        return "(none)"
    return ", ".join(f"{rp[:8]}:{rc}={n}" for rp, rc, n in state)


# --------------------------------------------------------------------------------------------------
# Claimer (runs in its own process)


class Outcome:
    ACK, REFUSED, UNCERTAIN = "ack", "refused", "uncertain"


class Claimer:
    def __init__(self, index: int, base: str, layout: dict, seed: int, fault: str, stop, operations):
        self.index = index
        self.base = base
        self.layout = layout
        self.rng = random.Random(seed)
        self.faulty = fault != "none"
        self.stop = stop
        self.operations = operations
        self.session = harness.new_session(TOKEN, VERSION)
        self.owned: dict[str, dict] = {}  # consumer -> {"state": tuple, "gen": int}
        # ("write", seq, time, kind, outcome, {consumer: state}) | ("observe", seq, time, {consumer: state})
        self.events: list = []
        self.stats = Counter()  # (row, column) -> n
        self.problems: list[dict] = []  # violations seen by this claimer
        self.unresolved: list[str] = []  # consumers named by an uncertain write not read back yet
        self.seq = 0
        self.ours = set(layout["all"])
        self.connection_failed = False
        self.end_at = float("inf")

    # -- HTTP with classification

    def request(self, row: str, method: str, path: str, body=None, version=VERSION):
        """Returns (column, response or None)."""
        headers = {"OpenStack-API-Version": f"placement {version}"}
        sent_at = time.time()
        self.connection_failed = False
        try:
            r = self.session.request(method, self.base + path, json=body, headers=headers, timeout=REQUEST_TIMEOUT)
        except requests.ConnectionError as e:
            column = "refused-conn" if _refused_before_sending(e) else "lost-conn"
            self.stats[(row, column)] += 1
            self.connection_failed = True
            if not self.faulty:
                self.problem(
                    "connection error without a fault", method, path, body, None, f"{type(e).__name__}: {e}", sent_at
                )
            return column, None
        except requests.RequestException as e:  # timeouts, chunked encoding errors, ...
            self.stats[(row, "lost-conn")] += 1
            self.connection_failed = True
            if not self.faulty:
                self.problem(
                    "request failed without a fault", method, path, body, None, f"{type(e).__name__}: {e}", sent_at
                )
            return "lost-conn", None
        status = r.status_code
        if 200 <= status < 300:
            column = "2xx"
        elif status == 409:
            column = "409"
        elif status == 503:
            column = "503"
        else:
            column = "other"
        self.stats[(row, column)] += 1
        if status >= 400:
            problem = error_body_problem(r)
            if problem:
                self.problem(f"error body not in Placement's format ({problem})", method, path, body, r, None, sent_at)
        if status >= 500 and status != 503:
            self.problem(f"HTTP {status}", method, path, body, r, None, sent_at)
        elif 400 <= status < 500 and status != 409:
            # e.g. a 404 deleting a consumer that the log says holds allocations
            self.problem(f"unexpected HTTP {status}", method, path, body, r, None, sent_at)
        elif status == 503 and not self.faulty:
            self.problem("HTTP 503 without a fault", method, path, body, r, None, sent_at)
        return column, r

    def problem(self, what, method, path, body, response, error, at):
        self.problems.append(
            {
                "what": what,
                "claimer": self.index,
                "time": at,
                "request": f"{method} {path}",
                "body": json.dumps(body)[:2000] if body is not None else None,
                "status": response.status_code if response is not None else None,
                "response": response.text[:2000] if response is not None else error,
                "request_id": response.headers.get("x-openstack-request-id") if response is not None else None,
            }
        )

    # -- the log

    def record_write(self, kind: str, column: str, response, changes: dict) -> str:
        self.seq += 1
        if column == "2xx":
            outcome = Outcome.ACK
        elif column in ("409", "503", "refused-conn") or (response is not None and 400 <= response.status_code < 500):
            outcome = Outcome.REFUSED
        else:  # lost connection, timeout, 500
            outcome = Outcome.UNCERTAIN
        self.events.append(("write", self.seq, time.time(), kind, outcome, changes))
        return outcome

    def observe(self, consumers, *, deadline=None) -> dict | None:
        """Read consumers back; returns {c: (state, gen)} or None when the server stayed away."""
        found = {}
        for consumer in consumers:
            while True:
                column, r = self.request("read-back", "GET", f"/allocations/{consumer}")
                if r is not None and r.status_code == 200:
                    body = r.json()
                    found[consumer] = (freeze(body.get("allocations", {})), body.get("consumer_generation"))
                    break
                if deadline is None or time.monotonic() > deadline:
                    return None
                time.sleep(0.25)
        self.seq += 1
        self.events.append(("observe", self.seq, time.time(), {c: s for c, (s, _) in found.items()}))
        for consumer, (state, gen) in found.items():
            if state:
                self.owned[consumer] = {"state": state, "gen": gen}
            else:
                self.owned.pop(consumer, None)
        return found

    def resolve(self, consumers) -> None:
        """After an uncertain write (or a surprise): learn what the server holds for these consumers
        before touching them again."""
        deadline = time.monotonic() + RESOLVE_GRACE
        if self.observe(consumers, deadline=deadline) is None:
            # Still unreachable: leave them to the final audit, and stop using them.
            self.unresolved.extend(consumers)
            for consumer in consumers:
                self.owned.pop(consumer, None)

    # -- choosing what to claim

    def random_request(self) -> dict:
        rng = self.rng
        wanted = {"VCPU": rng.randint(1, 3), "MEMORY_MB": rng.choice((512, 1024, 2048))}
        if rng.random() < 0.3:
            wanted["DISK_GB"] = rng.choice((20, 40, 80))
        if rng.random() < 0.2 and self.layout["gpus"]:
            wanted["VGPU"] = 1
        return wanted

    def candidates(self, wanted: dict) -> list[dict]:
        plain = ",".join(f"{rc}:{n}" for rc, n in wanted.items() if rc != "VGPU")
        query = f"resources={plain}"
        if wanted.get("VGPU"):
            query += f"&resources_GPU=VGPU:{wanted['VGPU']}&group_policy=none"
        # member_of: only this run's providers (a shared server may hold other runs' or real ones).
        query += f"&member_of={self.layout['aggregate']}&limit=5"
        column, r = self.request("candidates", "GET", f"/allocation_candidates?{query}")
        if r is None or r.status_code != 200:
            return []
        found = [req["allocations"] for req in r.json().get("allocation_requests", [])]
        foreign = [a for a in found if not set(a) <= self.ours]
        if foreign:
            self.problem(
                "allocation candidate outside member_of",
                "GET",
                f"/allocation_candidates?{query}",
                None,
                r,
                None,
                time.time(),
            )
            found = [a for a in found if set(a) <= self.ours]
        if not found:
            self.stats[("no-candidates", "2xx")] += 1
        return found

    def provider_choice(self, wanted: dict) -> list[dict]:
        """The ``GET /resource_providers?resources=`` way: hosts alone (no disk, no GPU)."""
        plain = {rc: n for rc, n in wanted.items() if rc in ("VCPU", "MEMORY_MB")}
        query = ",".join(f"{rc}:{n}" for rc, n in plain.items())
        column, r = self.request(
            "providers", "GET", f"/resource_providers?resources={query}&member_of={self.layout['aggregate']}"
        )
        if r is None or r.status_code != 200:
            return []
        hosts = set(self.layout["hosts"])
        found = [p["uuid"] for p in r.json().get("resource_providers", []) if p["uuid"] in hosts]
        if not found:
            self.stats[("no-candidates", "2xx")] += 1
        return [{rp: {"resources": plain}} for rp in found]

    def destination(self, wanted: dict) -> dict | None:
        roll = self.rng.random()
        if roll < 0.7:
            options = self.candidates(wanted)
        elif roll < 0.85:
            options = self.provider_choice(wanted)
        else:
            # Blind: a random host and, for disk, the sharing provider, whatever they have left.
            host = self.rng.choice(self.layout["hosts"])
            choice = {host: {"resources": {rc: n for rc, n in wanted.items() if rc in ("VCPU", "MEMORY_MB")}}}
            if "DISK_GB" in wanted:
                choice[self.layout["sharing"]] = {"resources": {"DISK_GB": wanted["DISK_GB"]}}
            if "VGPU" in wanted:
                child = self.layout["gpus"].get(host)
                if child:
                    choice[child] = {"resources": {"VGPU": wanted["VGPU"]}}
            options = [choice]
        return self.rng.choice(options) if options else None

    # -- the four writes

    def body(self, allocations: dict, generation, consumer_type="INSTANCE") -> dict:
        return {
            "allocations": allocations,
            "project_id": PROJECT,
            "user_id": USER,
            "consumer_generation": generation,
            "consumer_type": consumer_type,
        }

    def after_write(self, kind, column, r, changes: dict, generations: dict) -> None:
        outcome = self.record_write(kind, column, r, changes)
        if outcome == Outcome.ACK:
            for consumer, state in changes.items():
                if state:
                    old = generations.get(consumer)
                    self.owned[consumer] = {"state": state, "gen": 1 if old is None else old + 1}
                else:
                    self.owned.pop(consumer, None)
            if self.rng.random() < 0.05:
                self.observe(list(changes), deadline=time.monotonic() + RESOLVE_GRACE)
        elif outcome == Outcome.UNCERTAIN:
            self.resolve(list(changes))
        elif r is not None and r.status_code == 409 and error_code(r) == error_codes.CONCURRENT_UPDATE:
            # Nobody else writes this claimer's consumers: a generation conflict means the server
            # holds something other than what the log says.  Read it back (the audit compares).
            existing = [c for c in changes if generations.get(c) is not None]
            if existing:
                self.stats[("generation-conflicts", "409")] += 1
                self.problem(
                    "unexpected consumer generation conflict",
                    r.request.method,
                    urllib.parse.urlsplit(r.request.url).path,
                    None,
                    r,
                    None,
                    time.time(),
                )
                self.resolve(existing)

    def do_create(self) -> None:
        wanted = self.random_request()
        allocations = self.destination(wanted)
        if allocations is None:
            return
        consumer = str(uuidlib.uuid4())
        column, r = self.request("create", "PUT", f"/allocations/{consumer}", self.body(allocations, None))
        self.after_write("create", column, r, {consumer: freeze(allocations)}, {consumer: None})

    def pick_owned(self) -> str:
        return self.rng.choice(sorted(self.owned))

    def do_replace(self) -> None:
        consumer = self.pick_owned()
        known = self.owned[consumer]
        if self.rng.random() < 0.5:
            # Resize in place: one more or one less VCPU on the same providers.
            allocations = thaw(known["state"])
            for entry in allocations.values():
                if "VCPU" in entry["resources"]:
                    n = entry["resources"]["VCPU"] + self.rng.choice((-1, 1))
                    entry["resources"]["VCPU"] = max(1, n)
        else:
            allocations = self.destination(self.random_request())
            if allocations is None:
                return
        column, r = self.request("replace", "PUT", f"/allocations/{consumer}", self.body(allocations, known["gen"]))
        self.after_write("replace", column, r, {consumer: freeze(allocations)}, {consumer: known["gen"]})

    def do_move(self) -> None:
        consumer = self.pick_owned()
        known = self.owned[consumer]
        migration = str(uuidlib.uuid4())
        if self.rng.random() < 0.2:
            destination = {}  # move-away: the migration consumer keeps everything
        else:
            destination = self.destination(totals(known["state"]))
            if destination is None:
                return
        body = {
            consumer: self.body(destination, known["gen"]),
            migration: self.body(thaw(known["state"]), None, "MIGRATION"),
        }
        column, r = self.request("move", "POST", "/allocations", body)
        self.after_write(
            "move",
            column,
            r,
            {consumer: freeze(destination), migration: known["state"]},
            {consumer: known["gen"], migration: None},
        )

    def do_delete(self) -> None:
        consumer = self.pick_owned()
        column, r = self.request("delete", "DELETE", f"/allocations/{consumer}")
        self.after_write("delete", column, r, {consumer: ()}, {consumer: self.owned[consumer]["gen"]})

    def loop(self) -> None:
        rounds = 0
        while not self.stop.is_set() and time.time() < self.end_at:
            if self.operations is not None and rounds >= self.operations:
                break
            rounds += 1
            roll = self.rng.random()
            try:
                if not self.owned or roll < 0.4:
                    self.do_create()
                elif roll < 0.6:
                    self.do_replace()
                elif roll < 0.8:
                    self.do_move()
                else:
                    self.do_delete()
            except Exception:  # noqa: BLE001 - a bug of the tool: report it, keep the log
                self.problems.append(
                    {
                        "what": "claimer crashed",
                        "claimer": self.index,
                        "time": time.time(),
                        "request": None,
                        "body": None,
                        "status": None,
                        "response": traceback.format_exc(),
                        "request_id": None,
                    }
                )
                break
            if self.connection_failed:
                time.sleep(0.05)  # the server is away: do not spin


def _refused_before_sending(error: requests.ConnectionError) -> bool:
    """True when the TCP connection was never established, so the server cannot have seen the request.

    requests wraps urllib3's MaxRetryError, whose ``reason`` is the NewConnectionError (connection
    refused) or ConnectTimeoutError; anything else (reset, closed mid-response) may have been processed.
    """
    pending, seen = [error], set()
    while pending:
        e = pending.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, ConnectionRefusedError) or type(e).__name__ in ("NewConnectionError", "ConnectTimeoutError"):
            return True
        pending += [
            getattr(e, "reason", None),
            e.__cause__,
            e.__context__,
            *(a for a in e.args if isinstance(a, BaseException)),
        ]
    return False


def claimer_main(index, base, layout, seed, fault, operations, ready, go, stop, end_at, results) -> None:
    """Body of one claimer process."""
    with contextlib.suppress(Exception):
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    claimer = Claimer(index, base, layout, seed, fault, stop, operations)
    ready.put(index)
    go.wait()
    claimer.end_at = end_at.value
    try:
        claimer.loop()
    finally:
        results.put(
            (
                index,
                {
                    "events": claimer.events,
                    "stats": dict(claimer.stats),
                    "problems": claimer.problems,
                    "unresolved": claimer.unresolved,
                },
            )
        )
        claimer.session.close()


# --------------------------------------------------------------------------------------------------
# The server under test, when this run starts it


def wait_ready(url: str, timeout: float, process: subprocess.Popen | None = None) -> bool:
    session = harness.new_session(TOKEN, VERSION)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                return False
            try:
                if session.get(url + "/", timeout=5).status_code == 200:
                    return True
            except requests.RequestException:
                pass
            time.sleep(0.1)
    finally:
        session.close()
    return False


class OwnServer:
    """``berth serve`` in a subprocess of its own session (process group), logging to a file."""

    def __init__(self, database_url: str, workers: int, logdir: str):
        self.database_url = database_url
        self.workers = workers
        self.logpath = os.path.join(logdir, "server.log")
        self.process: subprocess.Popen | None = None
        self.port = 0
        self.url = ""

    def start(self, port: int | None = None) -> None:
        attempts = 3 if port is None else 1
        for _ in range(attempts):
            self.port = port or harness.free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            self.process = harness.spawn_server(self.port, self.database_url, self.workers, self.logpath)
            if wait_ready(self.url, SERVER_START_TIMEOUT, self.process):
                return
            self.stop()
        raise StressError(f"berth serve did not start:\n{self.log_tail()}")

    def worker_pids(self) -> list[int]:
        return harness.children_of(self.process.pid) if self.process else []

    def kill_group(self) -> None:
        """kill -9 of the master and every worker at once."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def log_text(self) -> str:
        try:
            with open(self.logpath, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def log_tail(self, lines: int = 40) -> str:
        return "".join(self.log_text().splitlines(keepends=True)[-lines:]) or "(no server log)"

    def stop(self, grace: float = 1.0) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds.  Only used once the audit is done: the
        workers log "Worker exiting" at once but then take seconds of CPU to wind down, which would
        double the length of a short run for nothing."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)
        with contextlib.suppress(ProcessLookupError):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _backend_of(url: str) -> str:
    return "postgresql" if url.startswith("postgres") else url.split(":", 1)[0].split("+", 1)[0]


# --------------------------------------------------------------------------------------------------
# Layout


class SetupApi:
    """Setup and audit requests; one session per thread, so that it can be used from a thread pool."""

    def __init__(self, base: str):
        self.base = base
        self._local = threading.local()

    @property
    def session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = harness.new_session(TOKEN, VERSION)
        return session

    def call(self, method, path, body=None, version=VERSION, expect=(200, 201, 204)):
        r = self.session.request(
            method,
            self.base + path,
            json=body,
            timeout=REQUEST_TIMEOUT,
            headers={"OpenStack-API-Version": f"placement {version}"},
        )
        if r.status_code not in expect:
            raise StressError(f"{method} {path} -> HTTP {r.status_code}: {r.text[:500]}")
        return r.json() if r.content else None

    def get_retrying(self, path: str, timeout: float = 60.0):
        """GET that waits out a server or database that is still coming back."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                r = self.session.get(self.base + path, timeout=REQUEST_TIMEOUT)
                if r.status_code == 200:
                    return r.json()
                if r.status_code != 503 or time.monotonic() > deadline:
                    raise StressError(f"GET {path} -> HTTP {r.status_code}: {r.text[:500]}")
            except requests.ConnectionError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.2)

    def provider(self, name, parent=None, inventory=None, traits=(), aggregates=()) -> str:
        uuid = str(uuidlib.uuid4())
        body = {"name": name, "uuid": uuid}
        if parent:
            body["parent_provider_uuid"] = parent
        generation = self.call("POST", "/resource_providers", body, version=CREATE_VERSION)["generation"]
        if inventory:
            generation = self.call(
                "PUT",
                f"/resource_providers/{uuid}/inventories",
                {
                    "resource_provider_generation": generation,
                    "inventories": inventory,
                },
            )["resource_provider_generation"]
        if traits:
            generation = self.call(
                "PUT",
                f"/resource_providers/{uuid}/traits",
                {
                    "resource_provider_generation": generation,
                    "traits": list(traits),
                },
            )["resource_provider_generation"]
        if aggregates:
            self.call(
                "PUT",
                f"/resource_providers/{uuid}/aggregates",
                {
                    "resource_provider_generation": generation,
                    "aggregates": list(aggregates),
                },
            )
        return uuid


def build_layout(api: SetupApi, hosts: int, run_id: str) -> dict:
    aggregate = str(uuidlib.uuid4())
    sharing = api.provider(
        f"stress-{run_id}-shared-disk",
        inventory={"DISK_GB": {"total": SHARING_DISK_GB}},
        traits=[SHARING_TRAIT],
        aggregates=[aggregate],
    )
    layout = {"hosts": [], "gpus": {}, "sharing": sharing, "aggregate": aggregate, "names": {sharing: "shared-disk"}}

    def make_host(i):
        inventory = HOST_INVENTORY_EVEN if i % 2 == 0 else HOST_INVENTORY_ODD
        host = api.provider(f"stress-{run_id}-host-{i:03d}", inventory=inventory, aggregates=[aggregate])
        child = None
        if i % GPU_EVERY == 0:
            child = api.provider(f"stress-{run_id}-host-{i:03d}-gpu", parent=host, inventory=GPU_INVENTORY)
        return i, host, child

    with ThreadPoolExecutor(AUDIT_THREADS) as pool:
        for i, host, child in pool.map(make_host, range(hosts)):
            layout["hosts"].append(host)
            layout["names"][host] = f"host-{i:03d}"
            if child:
                layout["gpus"][host] = child
                layout["names"][child] = f"host-{i:03d}-gpu"
    layout["all"] = [*layout["hosts"], *layout["gpus"].values(), sharing]
    return layout


def remove_layout(api: SetupApi, layout: dict, consumers) -> None:
    for consumer in consumers:
        api.call("DELETE", f"/allocations/{consumer}", expect=(204, 404))
    for rp in [*layout["gpus"].values(), *layout["hosts"], layout["sharing"]]:
        api.call("DELETE", f"/resource_providers/{rp}", expect=(204, 404))


# --------------------------------------------------------------------------------------------------
# Audit


def _violation(kind: str, detail: str, **extra) -> dict:
    return {"what": kind, "detail": detail, **extra}


def audit_providers(api: SetupApi, layout: dict) -> tuple[dict, list[dict]]:
    """Capacity and usage checks; returns (consumer -> state from the providers' lists, violations)."""
    violations = []
    holdings: dict[str, list] = {}

    def read(rp):
        return (
            rp,
            api.get_retrying(f"/resource_providers/{rp}/inventories")["inventories"],
            api.get_retrying(f"/resource_providers/{rp}/usages")["usages"],
            api.get_retrying(f"/resource_providers/{rp}/allocations")["allocations"],
        )

    with ThreadPoolExecutor(AUDIT_THREADS) as pool:
        views = list(pool.map(read, layout["all"]))
    for rp, inventories, usages, listed in views:
        name = layout["names"][rp]
        summed = Counter()
        for consumer, entry in listed.items():
            for rc, amount in entry["resources"].items():
                summed[rc] += amount
                holdings.setdefault(consumer, []).append((rp, rc, amount))
        for rc in sorted(set(usages) | set(summed) | set(inventories)):
            used = usages.get(rc, 0)
            if used != summed.get(rc, 0):
                violations.append(
                    _violation(
                        "usage mismatch",
                        f"{name} ({rp}) {rc}: usages say {used}, its allocations sum to {summed.get(rc, 0)}",
                    )
                )
            inv = inventories.get(rc)
            if inv is None:
                if used:
                    violations.append(_violation("usage without inventory", f"{name} ({rp}) {rc}: {used} used"))
                continue
            capacity = (inv["total"] - inv["reserved"]) * inv["allocation_ratio"]
            if used > capacity:
                violations.append(
                    _violation(
                        "over capacity",
                        f"{name} ({rp}) {rc}: used {used} > (total {inv['total']} - reserved "
                        f"{inv['reserved']}) * ratio {inv['allocation_ratio']} = {capacity:g}",
                    )
                )
    return {c: tuple(sorted(items)) for c, items in holdings.items()}, violations


def _key(world: dict) -> tuple:
    return tuple(sorted((c, s) for c, s in world.items() if s))


def _dedupe(worlds: list[dict]) -> list[dict]:
    seen, out = set(), []
    for w in worlds:
        k = _key(w)
        if k not in seen:
            seen.add(k)
            out.append(w)
    return out


def replay(index: int, events: list, actual: dict | None) -> tuple[list[dict], dict]:
    """Check one claimer's read-backs, and its consumers' final state against what its log allows.

    A *world* is one assignment of states to the claimer's consumers that the log permits: an
    acknowledged write sets its consumers in every world, a refused one changes nothing, an uncertain
    one doubles the worlds (applied as a whole, or not at all).  A read-back or the final state must
    match at least one world.
    """
    violations = []
    notes = Counter()
    worlds: list[dict] = [{}]
    last_write: dict[str, tuple] = {}
    t0 = events[0][2] if events else 0

    def explain(seen: dict, when: str, seq: int, at: float) -> None:
        lines = []
        for consumer, state in sorted(seen.items()):
            allowed = {w.get(consumer, ()) for w in worlds}
            if state not in allowed:
                lw = last_write.get(consumer)
                how = f"last write #{lw[0]} {lw[1]} ({lw[2]}) at {lw[3] - t0:.2f}s" if lw else "never written"
                lines.append(
                    f"consumer {consumer} holds [{show(state)}] but the log allows only "
                    f"{' or '.join('[' + show(a) + ']' for a in sorted(allowed))}; {how}"
                )
        if not lines:
            lines.append(
                "the consumers hold a mix of old and new states of one uncertain write: "
                + "; ".join(f"{c} [{show(s)}]" for c, s in sorted(seen.items()))
            )
        kind = "read-back contradicts the log" if when == "read-back" else "final state contradicts the log"
        for line in lines:
            violations.append(_violation(kind, f"claimer {index}, {when} #{seq}: {line}"))

    for event in events:
        if event[0] == "write":
            _, seq, at, kind, outcome, changes = event
            for consumer in changes:
                last_write[consumer] = (seq, kind, outcome, at)
            if outcome == Outcome.ACK:
                for w in worlds:
                    w.update(changes)
            elif outcome == Outcome.UNCERTAIN:
                notes["uncertain writes"] += 1
                worlds = _dedupe(worlds + [{**w, **changes} for w in worlds])
                if len(worlds) > MAX_WORLDS:
                    notes["worlds capped"] += 1
                    worlds = worlds[:MAX_WORLDS]
        else:
            _, seq, at, seen = event
            kept = [w for w in worlds if all(w.get(c, ()) == s for c, s in seen.items())]
            if not kept:
                explain(seen, "read-back", seq, at)
                kept = _dedupe([{**w, **seen} for w in worlds])  # carry on from what the server holds
            worlds = kept
    if actual is not None:
        seen = {c: actual.get(c, ()) for c in last_write}
        if not any(all(w.get(c, ()) == s for c, s in seen.items()) for w in worlds):
            explain(seen, "final audit", len(events), time.time())
    return violations, {"consumers": set(last_write), "notes": notes}


# --------------------------------------------------------------------------------------------------
# Result


@dataclass
class StressResult:
    backend: str
    workers: int | None
    concurrency: int
    fault: str
    seconds_planned: float | None
    elapsed: float = 0.0
    stats: Counter = field(default_factory=Counter)
    faults: list = field(default_factory=list)
    violations: list = field(default_factory=list)
    providers: int = 0
    consumers_seen: int = 0
    consumers_present: int = 0
    notes: Counter = field(default_factory=Counter)
    server_tracebacks: int = 0
    server_exceptions: dict = field(default_factory=dict)
    server_log_excerpt: str = ""

    def count(self, column: str, rows=None) -> int:
        return sum(n for (row, col), n in self.stats.items() if col == column and (rows is None or row in rows))

    @property
    def http_500s(self) -> int:
        return sum(1 for v in self.violations if v["what"] == "HTTP 500")

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def requests(self) -> int:
        return sum(n for (row, _), n in self.stats.items() if row in KINDS or row in READS)

    @property
    def writes(self) -> int:
        return sum(n for (row, _), n in self.stats.items() if row in KINDS)

    def table(self) -> str:
        head = (
            f"berth stress: {self.backend}, {self.workers or '?'} workers, {self.concurrency} claimers, "
            f"fault {self.fault}, {self.providers} providers"
        )
        width = max(len(k) for k in (*KINDS, *READS, "all requests")) + 2
        lines = [head, "", f"{'operation':<{width}}{'total':>8}" + "".join(f"{c:>14}" for c in OUTCOME_COLUMNS)]
        rows = [*KINDS, *READS]
        for row in [*rows, "all requests"]:
            chosen = rows if row == "all requests" else (row,)
            counts = [self.count(c, chosen) for c in OUTCOME_COLUMNS]
            if row == "all requests":
                lines.append("-" * len(lines[2]))
            lines.append(f"{row:<{width}}{sum(counts):>8}" + "".join(f"{n:>14}" for n in counts))
        lines.append("")
        no_cand = self.stats.get(("no-candidates", "2xx"), 0)
        lines.append(
            f"rounds without any candidate: {no_cand}; unexpected consumer generation "
            f"conflicts: {self.stats.get(('generation-conflicts', '409'), 0)}"
        )
        if self.faults:
            for f in self.faults:
                lines.append(f"fault injected: {f['kind']} at {f['at']:.1f}s ({f['detail']})")
        else:
            lines.append("faults injected: 0")
        lines.append(
            f"consumers audited: {self.consumers_seen} ({self.consumers_present} holding allocations "
            f"at the end); uncertain writes: {self.notes.get('uncertain writes', 0)}"
        )
        if self.server_tracebacks:
            lines.append(f"server log: {self.server_tracebacks} traceback(s)")
            for line, n in list(self.server_exceptions.items())[:5]:
                lines.append(f"  {n} x {line[:160]}")
        kinds = Counter(v["what"] for v in self.violations)
        lines.append(
            f"violations: {len(self.violations)}"
            + (" (" + ", ".join(f"{k}: {n}" for k, n in kinds.most_common()) + ")" if kinds else "")
        )
        rate = self.requests / self.elapsed if self.elapsed else 0.0
        wrate = self.writes / self.elapsed if self.elapsed else 0.0
        lines.append(f"elapsed: {self.elapsed:.1f}s   requests/s: {rate:.1f}   writes/s: {wrate:.1f}")
        return "\n".join(lines)

    def violation_report(self, limit: int = 20) -> str:
        lines = [f"{len(self.violations)} violation(s):"]
        for v in self.violations[:limit]:
            lines.append(
                f"- {v['what']}: "
                + ", ".join(
                    f"{k}={v[k]}"
                    for k in ("detail", "request", "status", "request_id", "body", "response")
                    if v.get(k) is not None
                )
            )
        if len(self.violations) > limit:
            lines.append(f"... and {len(self.violations) - limit} more")
        if self.server_log_excerpt:
            lines.append("--- server log excerpt ---")
            lines.append(self.server_log_excerpt)
        return "\n".join(lines)

    def as_dict(self) -> dict:
        out = {k: v for k, v in asdict(self).items() if k not in ("stats", "notes")}
        out["stats"] = {f"{row}/{col}": n for (row, col), n in sorted(self.stats.items())}
        out["notes"] = dict(self.notes)
        out["requests"] = self.requests
        out["writes"] = self.writes
        out["http_500s"] = self.http_500s
        return out


# --------------------------------------------------------------------------------------------------
# The run


def run_stress(config: StressConfig, *, postgres=None, server: OwnServer | None = None) -> StressResult:
    """Set up, run the load and the faults, audit; the in-process entry point (tests call this).

    ``postgres``: a tests/pgserver.py server that ``restart-postgres`` may restart.  ``server``: an
    already started :class:`OwnServer` to use (and leave running) instead of starting one; several
    runs may share it, each with providers of its own.  Raises :class:`StressError` when the setup
    fails; violations are in the result.
    """
    if config.fault not in FAULTS:
        raise StressError(f"unknown fault {config.fault!r}; one of {', '.join(FAULTS)}")
    tmpdir = tempfile.mkdtemp(prefix="berth-stress-")
    own_server: OwnServer | None = None
    own_pg = None
    try:
        if server is not None:
            base, backend, workers = server.url, _backend_of(server.database_url), server.workers
        elif config.url:
            base = harness.check_loopback_url(config.url, StressError)
            backend, workers = "server at " + base, None
            if config.fault == "kill-server":
                raise StressError("--fault kill-server needs a server this run starts (no --url)")
            if config.fault == "kill-worker" and not config.server_pid:
                raise StressError("--fault kill-worker with --url needs --server-pid (the server's master process)")
        else:
            spec = config.database or "sqlite"
            if spec == "sqlite":
                database_url = f"sqlite:///{os.path.join(tmpdir, 'stress.sqlite')}"
            elif spec == "postgresql":
                log("starting a throwaway PostgreSQL")
                try:
                    own_pg = postgres = harness.load_pgserver(StressError, "berth_stress_pgserver").start_postgres()
                except StressError:
                    raise
                except Exception as e:  # noqa: BLE001
                    raise StressError(f"could not start PostgreSQL: {e}") from e
                database_url = own_pg.create_database(f"stress_{uuidlib.uuid4().hex[:8]}")
            else:
                database_url = spec
            backend, workers = _backend_of(database_url), config.workers
            server = own_server = OwnServer(database_url, config.workers, tmpdir)
            server.start()
            base = server.url
            log(f"berth serve ({backend}, {config.workers} workers) at {base}, log {server.logpath}")
        if config.fault == "restart-postgres" and postgres is None:
            raise StressError(
                "--fault restart-postgres needs --database postgresql (a PostgreSQL this run starts and may restart)"
            )
        result = StressResult(
            backend=backend,
            workers=workers,
            concurrency=config.concurrency,
            fault=config.fault,
            seconds_planned=None if config.operations else config.seconds,
        )
        log_offset = len(server.log_text()) if server is not None else 0
        _load_and_audit(config, base, server, postgres, result)
        if server is not None:
            text = server.log_text()[log_offset:]
            result.server_tracebacks = text.count("Traceback (most recent call last)")
            result.server_exceptions = summarise_exceptions(text)
            if result.server_tracebacks:
                start = text.index("Traceback (most recent call last)")
                head = text.rfind("\n", 0, max(0, start - 1))
                result.server_log_excerpt = "\n".join(text[head + 1 :].splitlines()[:80])
            if config.server_log:
                shutil.copyfile(server.logpath, config.server_log)
        return result
    finally:
        if own_server is not None:
            own_server.stop()
        if own_pg is not None:
            own_pg.stop()
        shutil.rmtree(tmpdir, ignore_errors=True)


_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)): (.*)$")


def summarise_exceptions(text: str) -> dict:
    """Exception lines of the server log's tracebacks, counted (digits masked: ports, pids, ids)."""
    found = Counter()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _EXCEPTION_LINE.match(line)
        if m and i > 0 and lines[i - 1].startswith(" "):
            found[re.sub(r"\d+", "N", line)[:300]] += 1
    return dict(found.most_common())


def _fault_times(config: StressConfig) -> list[float]:
    if config.fault == "none":
        return []
    n = config.fault_count
    if config.operations:
        return [1.0 + 2.0 * k for k in range(n)]
    return [config.seconds * (k + 1) / (n + 1) for k in range(n)]


def _inject(config: StressConfig, server: OwnServer | None, postgres, rng: random.Random) -> str:
    if config.fault == "kill-worker":
        master = server.process.pid if server else config.server_pid
        workers = harness.children_of(master)
        if not workers:
            raise StressError(f"no worker processes under pid {master}")
        victim = rng.choice(workers)
        os.kill(victim, signal.SIGKILL)
        return f"SIGKILL to worker {victim} of {len(workers)}"
    if config.fault == "kill-server":
        began = time.monotonic()
        pgid = server.process.pid
        server.kill_group()
        time.sleep(config.down_seconds)
        server.start(port=server.port)
        return f"SIGKILL to process group {pgid}, back on port {server.port} after {time.monotonic() - began:.1f}s"
    if config.fault == "restart-postgres":
        down = postgres.restart(mode="fast", down_seconds=config.down_seconds)
        return f"pg_ctl stop -m fast + start, down {down:.1f}s"
    raise AssertionError(config.fault)


def _load_and_audit(config: StressConfig, base: str, server, postgres, result: StressResult) -> None:
    seed = config.seed if config.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    run_id = uuidlib.uuid4().hex[:8]
    api = SetupApi(base)
    layout = build_layout(api, config.providers, run_id)
    result.providers = len(layout["all"])
    log(f"layout: {config.providers} hosts, {len(layout['gpus'])} GPU children, 1 sharing disk provider; seed {seed}")

    # Forked claimers start in milliseconds; "spawn" and "forkserver" would import the main module
    # (all of berth.cli.main, or pytest) again in every claimer, seconds each on a small machine.
    # The children only use fresh requests sessions, and leave through os._exit (no atexit hooks).
    ctx = multiprocessing.get_context("fork")
    ready, results = ctx.Queue(), ctx.Queue()
    go, stop = ctx.Event(), ctx.Event()
    end_at = ctx.Value("d", float("inf"), lock=False)
    processes = [
        ctx.Process(
            target=claimer_main,
            name=f"stress-claimer-{i}",
            daemon=True,
            args=(
                i,
                base,
                layout,
                rng.randrange(2**32),
                config.fault,
                config.operations,
                ready,
                go,
                stop,
                end_at,
                results,
            ),
        )
        for i in range(config.concurrency)
    ]
    for p in processes:
        p.start()
    collected: dict[int, dict] = {}
    try:
        for _ in processes:
            ready.get(timeout=120)
        log(
            f"{config.concurrency} claimers running"
            + (f" for {config.seconds:g}s" if not config.operations else f", {config.operations} rounds each")
            + (f", fault {config.fault} x{config.fault_count}" if config.fault != "none" else "")
        )
        t0 = time.monotonic()
        if not config.operations:
            end_at.value = time.time() + config.seconds  # claimers stop even while a fault blocks us
        go.set()

        def pump(until: float) -> None:
            while len(collected) < len(processes):
                left = until - time.monotonic()
                if left <= 0:
                    return
                try:
                    index, data = results.get(timeout=min(left, 0.5))
                except queue.Empty:
                    if not any(p.is_alive() for p in processes) and results.empty():
                        raise StressError("claimer processes died without reporting") from None
                    continue
                collected[index] = data

        for at in _fault_times(config):
            pump(t0 + at)
            if len(collected) == len(processes):
                break
            began = time.monotonic() - t0
            detail = _inject(config, server, postgres, rng)
            result.faults.append({"kind": config.fault, "at": began, "detail": detail})
            log(f"fault at {began:.1f}s: {detail}")
        if not config.operations:
            pump(t0 + config.seconds)
            stop.set()
        pump(time.monotonic() + RESOLVE_GRACE + REQUEST_TIMEOUT + 60)
        result.elapsed = time.monotonic() - t0
        if len(collected) < len(processes):
            raise StressError("claimers did not finish in time")
    finally:
        stop.set()
        go.set()
        for p in processes:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()

    for index in sorted(collected):
        data = collected[index]
        result.stats.update({tuple(k): v for k, v in data["stats"].items()})
        result.violations.extend(data["problems"])
        if data["unresolved"]:
            result.notes["consumers never read back"] += len(data["unresolved"])

    if server is not None and not wait_ready(base, SERVER_START_TIMEOUT):
        raise StressError(f"the server does not answer after the load:\n{server.log_tail()}")
    log("auditing")
    actual, provider_violations = audit_providers(api, layout)
    result.violations.extend(provider_violations)
    known: set[str] = set()
    for index in sorted(collected):
        violations, info = replay(index, collected[index]["events"], actual)
        result.violations.extend(violations)
        result.notes.update(info["notes"])
        known |= info["consumers"]
    for consumer in sorted(set(actual) - known):
        result.violations.append(
            _violation(
                "unknown consumer", f"consumer {consumer} holds [{show(actual[consumer])}] but no claimer wrote it"
            )
        )
    # GET /allocations/{consumer} must agree with the providers' lists: every holder, and a sample
    # of the consumers that should hold nothing (refused creates, deletes, moves away).
    empty = sorted(known - set(actual))
    sample = sorted(actual) + rng.sample(empty, min(len(empty), ABSENT_SAMPLE))
    with ThreadPoolExecutor(AUDIT_THREADS) as pool:
        views = list(pool.map(lambda c: (c, api.get_retrying(f"/allocations/{c}")), sample))
    for consumer, body in views:
        state = freeze(body.get("allocations", {}))
        if state != actual.get(consumer, ()):
            result.violations.append(
                _violation(
                    "consumer view differs from provider view",
                    f"GET /allocations/{consumer} says [{show(state)}], the providers' lists say "
                    f"[{show(actual.get(consumer, ()))}]",
                )
            )
    result.consumers_seen = len(known)
    result.consumers_present = len(actual)
    if config.url and not config.keep:
        remove_layout(api, layout, sorted(actual))
