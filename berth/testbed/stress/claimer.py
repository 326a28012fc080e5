"""One claimer: a process that reads, writes its own consumers, and logs every write and read-back."""

from __future__ import annotations

import contextlib
import json
import random
import signal
import time
import traceback
import uuid as uuidlib
from collections import Counter
from typing import Any

from berth.domain import error_codes
from berth.testbed.client import Client, RequestFailed, Response, error_code
from berth.testbed.stress.config import PROJECT, REQUEST_TIMEOUT, RESOLVE_GRACE, USER
from berth.testbed.stress.leasing import Leases
from berth.testbed.stress.responses import error_body_problem, outcome_column, status_problem
from berth.testbed.stress.states import State, freeze, thaw, totals

Allocations = dict[str, Any]  # provider -> {"resources": {class: amount}}
Owned = dict[str, Any]  # {"state": State, "gen": int}


class Outcome:
    ACK, REFUSED, UNCERTAIN = "ack", "refused", "uncertain"
    # A lease's expiry has passed: its consumer's allocations are released now or soon.
    EXPIRY = "expiry"


def write_outcome(column: str, response: Response | None) -> str:
    if column == "2xx":
        return Outcome.ACK
    if column in ("409", "503", "refused-conn") or (response is not None and 400 <= response.status_code < 500):
        return Outcome.REFUSED
    return Outcome.UNCERTAIN  # lost connection, timeout, 500


class Claimer:
    def __init__(
        self,
        index: int,
        base: str,
        layout: dict[str, Any],
        seed: int,
        fault: str,
        stop: Any,
        operations: int | None,
        picks: float = 0.0,
    ):
        self.index = index
        self.layout = layout
        self.rng = random.Random(seed)
        self.faulty = fault != "none"
        self.stop = stop
        self.operations = operations
        # Never a request sent twice: the log must know whether each write may have happened.
        self.client = Client(base, timeout=REQUEST_TIMEOUT, at_most_once=True)
        self.owned: dict[str, Owned] = {}  # consumer -> {"state": tuple, "gen": int}
        # ("write", seq, time, kind, outcome, {consumer: state}) | ("observe", seq, time, {consumer: state})
        self.events: list[tuple[Any, ...]] = []
        self.stats: Counter[tuple[str, str]] = Counter()  # (row, column) -> n
        self.problems: list[dict[str, Any]] = []  # violations seen by this claimer
        self.unresolved: list[str] = []  # consumers named by an uncertain write not read back yet
        self.seq = 0
        self.ours = set(layout["all"])
        self.connection_failed = False
        self.end_at = float("inf")
        self.picks = picks  # the share of rounds that pick with a lease (leasing.py)
        self.leases = Leases(self)

    # -- HTTP with classification

    def request(
        self, row: str, method: str, path: str, body: Any = None, expected: tuple[int, ...] = ()
    ) -> tuple[str, Response | None]:
        """Returns (column, response or None).  A status in ``expected`` is an answer the caller
        judges itself (a confirmation's 404 tells that the lease expired and was released)."""
        sent_at = time.time()
        self.connection_failed = False
        try:
            r = self.client.request(method, path, body)
        except RequestFailed as e:
            column = "lost-conn" if e.sent else "refused-conn"
            self.stats[(row, column)] += 1
            self.connection_failed = True
            if not self.faulty:
                what = "connection error" if e.connection else "request failed"
                self.problem(f"{what} without a fault", method, path, body, None, str(e), sent_at)
            return column, None
        column = outcome_column(r.status_code)
        self.stats[(row, column)] += 1
        if r.status_code >= 400:
            problem = error_body_problem(r)
            if problem:
                self.problem(f"error body not in Placement's format ({problem})", method, path, body, r, None, sent_at)
        problem = None if r.status_code in expected else status_problem(r.status_code, self.faulty)
        if problem:
            self.problem(problem, method, path, body, r, None, sent_at)
        return column, r

    def problem(
        self, what: str, method: str, path: str, body: Any, response: Response | None, error: str | None, at: float
    ) -> None:
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

    def observe(self, consumers: list[str], *, deadline: float | None = None) -> dict[str, tuple[State, Any]] | None:
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

    def resolve(self, consumers: list[str]) -> None:
        """After an uncertain write (or a surprise): learn what the server holds for these consumers
        before touching them again."""
        deadline = time.monotonic() + RESOLVE_GRACE
        if self.observe(consumers, deadline=deadline) is None:
            # Still unreachable: leave them to the final audit, and stop using them.
            self.unresolved.extend(consumers)
            for consumer in consumers:
                self.owned.pop(consumer, None)

    # -- choosing what to claim

    def random_request(self) -> dict[str, int]:
        rng = self.rng
        wanted = {"VCPU": rng.randint(1, 3), "MEMORY_MB": rng.choice((512, 1024, 2048))}
        if rng.random() < 0.3:
            wanted["DISK_GB"] = rng.choice((20, 40, 80))
        if rng.random() < 0.2 and self.layout["gpus"]:
            wanted["VGPU"] = 1
        return wanted

    def candidates(self, wanted: dict[str, int]) -> list[Allocations]:
        plain = ",".join(f"{rc}:{n}" for rc, n in wanted.items() if rc != "VGPU")
        query = f"resources={plain}"
        if wanted.get("VGPU"):
            query += f"&resources_GPU=VGPU:{wanted['VGPU']}&group_policy=none"
        # member_of: only this run's providers (a shared server may hold other runs' or real ones).
        query += f"&member_of={self.layout['aggregate']}&limit=5"
        path = f"/allocation_candidates?{query}"
        column, r = self.request("candidates", "GET", path)
        if r is None or r.status_code != 200:
            return []
        found = [req["allocations"] for req in r.json().get("allocation_requests", [])]
        if any(not set(a) <= self.ours for a in found):
            self.problem("allocation candidate outside member_of", "GET", path, None, r, None, time.time())
            found = [a for a in found if set(a) <= self.ours]
        if not found:
            self.stats[("no-candidates", "2xx")] += 1
        return found

    def provider_choice(self, wanted: dict[str, int]) -> list[Allocations]:
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

    def blind_choice(self, wanted: dict[str, int]) -> Allocations:
        """A random host and, for disk, the sharing provider, whatever they have left."""
        host = self.rng.choice(self.layout["hosts"])
        choice = {host: {"resources": {rc: n for rc, n in wanted.items() if rc in ("VCPU", "MEMORY_MB")}}}
        if "DISK_GB" in wanted:
            choice[self.layout["sharing"]] = {"resources": {"DISK_GB": wanted["DISK_GB"]}}
        if "VGPU" in wanted:
            child = self.layout["gpus"].get(host)
            if child:
                choice[child] = {"resources": {"VGPU": wanted["VGPU"]}}
        return choice

    def destination(self, wanted: dict[str, int]) -> Allocations | None:
        roll = self.rng.random()
        if roll < 0.7:
            options = self.candidates(wanted)
        elif roll < 0.85:
            options = self.provider_choice(wanted)
        else:
            options = [self.blind_choice(wanted)]
        return self.rng.choice(options) if options else None

    # -- the four writes

    def body(self, allocations: Allocations, generation: int | None, consumer_type: str = "INSTANCE") -> dict[str, Any]:
        return {
            "allocations": allocations,
            "project_id": PROJECT,
            "user_id": USER,
            "consumer_generation": generation,
            "consumer_type": consumer_type,
        }

    def write(
        self, kind: str, method: str, path: str, body: Any, changes: dict[str, State], generations: dict[str, Any]
    ) -> None:
        """Send one write, log it with the states it sets, and follow up on its outcome."""
        column, r = self.request(kind, method, path, body)
        self.seq += 1
        outcome = write_outcome(column, r)
        self.events.append(("write", self.seq, time.time(), kind, outcome, changes))
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
                self.problem("unexpected consumer generation conflict", method, path, None, r, None, time.time())
                self.resolve(existing)

    def do_create(self) -> None:
        allocations = self.destination(self.random_request())
        if allocations is None:
            return
        consumer = str(uuidlib.uuid4())
        path = f"/allocations/{consumer}"
        self.write(
            "create", "PUT", path, self.body(allocations, None), {consumer: freeze(allocations)}, {consumer: None}
        )

    def pick_owned(self) -> str:
        return self.rng.choice(sorted(self.owned))

    def do_replace(self) -> None:
        consumer = self.pick_owned()
        known = self.owned[consumer]
        allocations: Allocations | None
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
        body = self.body(allocations, known["gen"])
        changes = {consumer: freeze(allocations)}
        self.write("replace", "PUT", f"/allocations/{consumer}", body, changes, {consumer: known["gen"]})

    def do_move(self) -> None:
        consumer = self.pick_owned()
        known = self.owned[consumer]
        migration = str(uuidlib.uuid4())
        destination: Allocations = {}  # move-away: the migration consumer keeps everything
        if self.rng.random() >= 0.2:
            found = self.destination(totals(known["state"]))
            if found is None:
                return
            destination = found
        body = {
            consumer: self.body(destination, known["gen"]),
            migration: self.body(thaw(known["state"]), None, "MIGRATION"),
        }
        changes = {consumer: freeze(destination), migration: known["state"]}
        self.write("move", "POST", "/allocations", body, changes, {consumer: known["gen"], migration: None})

    def do_delete(self) -> None:
        consumer = self.pick_owned()
        generations = {consumer: self.owned[consumer]["gen"]}
        self.write("delete", "DELETE", f"/allocations/{consumer}", None, {consumer: ()}, generations)

    def round(self) -> None:
        self.leases.tick()
        if self.picks and self.rng.random() < self.picks:
            self.leases.pick()
            return
        roll = self.rng.random()
        if not self.owned or roll < 0.4:
            self.do_create()
        elif roll < 0.6:
            self.do_replace()
        elif roll < 0.8:
            self.do_move()
        else:
            self.do_delete()

    def crashed(self) -> None:
        """A bug of the tool: report it, keep the log."""
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

    def loop(self) -> None:
        rounds = 0
        while not self.stop.is_set() and time.time() < self.end_at:
            if self.operations is not None and rounds >= self.operations:
                break
            rounds += 1
            try:
                self.round()
            except Exception:  # noqa: BLE001 - reported as a violation, with its traceback
                self.crashed()
                break
            if self.connection_failed:
                time.sleep(0.05)  # the server is away: do not spin
        try:
            self.leases.drain()
        except Exception:  # noqa: BLE001 - reported as a violation, with its traceback
            self.crashed()


def claimer_main(
    index: int,
    base: str,
    layout: dict[str, Any],
    seed: int,
    fault: str,
    operations: int | None,
    picks: float,
    ready: Any,
    go: Any,
    stop: Any,
    end_at: Any,
    results: Any,
) -> None:
    """Body of one claimer process."""
    with contextlib.suppress(Exception):
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    claimer = Claimer(index, base, layout, seed, fault, stop, operations, picks)
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
                    "leases": claimer.leases.records,
                },
            )
        )
        claimer.client.close()
