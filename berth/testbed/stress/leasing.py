"""Picks with a lease in the stress load, and whether each lease was released once and on time.

A share of a claimer's rounds is ``POST /berth/pick`` with ``lease_seconds``, and each lease then
follows one of three plans: confirmed at once (``POST /berth/leases/{c}/confirm``), left to expire,
or released by the client (``DELETE /berth/leases/{c}``).  Times are the database's: the claimer
reads the lease's ``expires_at`` and ``expires_in`` (``GET /berth/leases/{c}``), which give the
moment and bound the offset between the database's clock and its own, so that a read-back can be
placed before or after the expiry whatever the clocks.  What is checked:

- a lease left to expire still holds its allocations when read back before its expiry (else
  *released early*) and has released them within ``LATE_AFTER`` seconds after it (else *released
  late*);
- a confirmation answered 204 keeps the allocations (read back after the expiry has passed); one
  answered 409 ``berth.lease.expired`` (or 404) finds them gone, and never before the expiry;
- a consumer whose lease expired or was released is claimed again, without a lease: a second
  release would take that claim away, which the log's replay reports (*released twice*).

The claimer's log records each of these as writes (the expiry as an ``EXPIRY`` event: released or
not yet, until a read-back tells) and read-backs, so the replay checks them like every other write.
"""

from __future__ import annotations

import datetime
import random
import time
import uuid as uuidlib
from collections import Counter
from typing import Any, Protocol

from berth.domain import error_codes
from berth.testbed.client import Response, error_code
from berth.testbed.stress.config import PROJECT, RESOLVE_GRACE, USER
from berth.testbed.stress.states import State, freeze, thaw


class Claimer(Protocol):
    """What of ``claimer.Claimer`` the leases use (which imports this module)."""

    rng: random.Random
    layout: dict[str, Any]
    ours: set[str]
    owned: dict[str, Any]
    events: list[tuple[Any, ...]]
    seq: int
    stats: Counter[tuple[str, str]]
    unresolved: list[str]

    def request(
        self, row: str, method: str, path: str, body: Any = None, expected: tuple[int, ...] = ()
    ) -> tuple[str, Response | None]: ...

    def problem(
        self, what: str, method: str, path: str, body: Any, response: Response | None, error: str | None, at: float
    ) -> None: ...

    def body(self, allocations: dict[str, Any], generation: int | None, consumer_type: str = "INSTANCE") -> Any: ...

    def write(
        self, kind: str, method: str, path: str, body: Any, changes: dict[str, State], generations: dict[str, Any]
    ) -> None: ...


PLANS = ("confirm", "expire", "release")
# Seconds after its expiry by which a lease must have been released: the reaper passes every 5 s
# (``berth serve --lease-check-interval``), a pass that fails while no database node takes writes
# is tried again one interval later, and a failover keeps writes away for a few seconds.
LATE_AFTER = 30.0
# A confirmed lease is read back this long after its expiry: a reaper that wrongly released it has
# passed by then.
KEPT_AFTER = 6.0
POLL = 0.5  # seconds between read-backs of a lease waiting to be released
RETRY = 0.25  # seconds between tries of a confirmation or release that got no answer
SLACK = 0.002  # ``expires_in`` is rounded to the millisecond


def parse_time(text: str) -> float:
    """A lease's timestamp (naive UTC, ``...Z``) as seconds since the epoch."""
    return datetime.datetime.fromisoformat(text.rstrip("Z")).replace(tzinfo=datetime.UTC).timestamp()


class Leases:
    """One claimer's leases: the picks that take them, the plans, the checks, the records."""

    def __init__(self, claimer: Claimer):
        self.claimer = claimer
        # Bounds of (database clock - this process's clock), narrowed by every lease read.
        self.offset: tuple[float, float] | None = None
        self.pending: list[dict[str, Any]] = []
        self.records: list[dict[str, Any]] = []
        self.generation: int | None = None  # the consumer generation of the last read-back

    # -- clock

    def learn_offset(self, body: dict[str, Any], sent: float, answered: float) -> float:
        """The lease's expiry on the database's clock; narrows the offset."""
        expires_at = parse_time(body["expires_at"])
        db_now = expires_at - float(body["expires_in"])
        lo, hi = db_now - answered - SLACK, db_now - sent + SLACK
        if self.offset is not None:
            lo, hi = max(lo, self.offset[0]), min(hi, self.offset[1])
            if lo > hi:  # the clocks moved: start again from this reading
                lo, hi = db_now - answered - SLACK, db_now - sent + SLACK
        self.offset = (lo, hi)
        return expires_at

    # -- requests

    def timed(
        self, row: str, method: str, path: str, body: Any = None, expected: tuple[int, ...] = ()
    ) -> tuple[str, Response | None, float, float]:
        sent = time.time()
        column, r = self.claimer.request(row, method, path, body, expected)
        return column, r, sent, time.time()

    def read(self, consumer: str) -> tuple[State | None, float, float]:
        """The consumer's allocations (None when unanswered), and when the read was sent and answered."""
        column, r, sent, answered = self.timed("read-back", "GET", f"/allocations/{consumer}")
        if r is None or r.status_code != 200:
            return None, sent, answered
        body = r.json()
        self.generation = body.get("consumer_generation")
        return freeze(body.get("allocations", {})), sent, answered

    def log_write(self, kind: str, outcome: str, changes: dict[str, State]) -> None:
        c = self.claimer
        c.seq += 1
        c.events.append(("write", c.seq, time.time(), kind, outcome, changes))

    def log_observe(self, consumer: str, state: State) -> None:
        c = self.claimer
        c.seq += 1
        c.events.append(("observe", c.seq, time.time(), {consumer: state}))

    def violation(self, what: str, rec: dict[str, Any], detail: str) -> None:
        self.claimer.problem(
            what, "GET", f"/allocations/{rec['consumer']}", None, None, f"lease ({rec['plan']}): {detail}", time.time()
        )

    # -- the pick

    def pick(self) -> None:
        c = self.claimer
        rng = c.rng
        wanted = {"VCPU": rng.randint(1, 2), "MEMORY_MB": rng.choice((512, 1024))}
        plan = rng.choice(PLANS)
        seconds = round(rng.uniform(1.5, 3.0), 3) if plan == "expire" else round(rng.uniform(3.0, 6.0), 3)
        consumer = str(uuidlib.uuid4())
        body = {
            "query": {
                "resources": ",".join(f"{rc}:{n}" for rc, n in wanted.items()),
                "member_of": c.layout["aggregate"],
            },
            "consumer": {"uuid": consumer, "project_id": PROJECT, "user_id": USER, "consumer_type": "INSTANCE"},
            "lease_seconds": seconds,
        }
        column, r, sent, answered = self.timed("pick", "POST", "/berth/pick", body)
        if r is not None and r.status_code == 200:
            state = freeze(r.json()["allocation_request"]["allocations"])
            if set(p for p, _, _ in state) - c.ours:
                c.problem("pick outside member_of", "POST", "/berth/pick", body, r, None, sent)
            self.log_write("pick", "ack", {consumer: state})
        elif column == "lost-conn" or (r is not None and r.status_code >= 500 and r.status_code != 503):
            # Uncertain: learn whether it landed; if it did, its lease runs out unless confirmed.
            state = self.resolve_pick(consumer)
            if not state:
                return
            plan = "expire" if plan == "confirm" else plan
        else:
            return  # refused: nothing written
        rec = {"consumer": consumer, "plan": plan, "seconds": seconds, "outcome": None, "reclaimed": False}
        self.records.append(rec)
        expires_at = None
        column, lr, lsent, lanswered = self.timed("lease-read", "GET", f"/berth/leases/{consumer}")
        if lr is not None and lr.status_code == 200:
            expires_at = self.learn_offset(lr.json(), lsent, lanswered)
        if expires_at is None and self.offset is not None:
            # Not read: bound the expiry by the pick's own send and answer.
            expires_at = answered + self.offset[1] + seconds
            rec["bounded"] = True
        rec["expires_at"] = expires_at
        if plan == "confirm":
            self.confirm(rec, state)
        elif plan == "release":
            self.release(rec, state)
        else:
            self.pending.append({"rec": rec, "state": state, "phase": "before"})

    def resolve_pick(self, consumer: str) -> State:
        deadline = time.monotonic() + RESOLVE_GRACE
        while time.monotonic() < deadline:
            state, _, _ = self.read(consumer)
            if state is not None:
                if state:
                    self.log_write("pick", "ack", {consumer: state})
                    self.claimer.stats[("uncertain-picks", "landed")] += 1
                return state
            time.sleep(RETRY)
        self.claimer.unresolved.append(consumer)
        return ()

    # -- the plans

    def insisting(self, row: str, method: str, path: str) -> tuple[Response | None, float, float]:
        """Send until a definite answer (2xx, 404 or 409); None after ``RESOLVE_GRACE`` without one.
        Confirming and releasing may be repeated: a repeat answers as the first would have."""
        deadline = time.monotonic() + RESOLVE_GRACE
        while True:
            # A confirmation's 404 is judged by ``confirm`` (a lease the reaper released, which
            # it checks came after the expiry); a release answers 204 whether or not one was held.
            column, r, sent, answered = self.timed(row, method, path, expected=(404,) if row == "confirm" else ())
            if r is not None and (r.status_code < 300 or r.status_code in (404, 409)):
                return r, sent, answered
            if time.monotonic() > deadline:
                return None, sent, answered
            time.sleep(RETRY)

    def before_expiry(self, rec: dict[str, Any], answered: float) -> bool:
        """Whether an answer came surely before the lease's expiry, by the database's clock."""
        return (
            self.offset is not None and rec["expires_at"] is not None and answered + self.offset[1] < rec["expires_at"]
        )

    def confirm(self, rec: dict[str, Any], state: State) -> None:
        consumer = rec["consumer"]
        r, sent, answered = self.insisting("confirm", "POST", f"/berth/leases/{consumer}/confirm")
        if r is None:
            rec["outcome"] = "unanswered"
            self.claimer.unresolved.append(consumer)
            return
        if r.status_code == 204:
            rec["outcome"] = "confirmed"
            self.log_write("confirm", "ack", {consumer: state})
            self.pending.append({"rec": rec, "state": state, "phase": "kept"})
            return
        expired = r.status_code == 404 or (r.status_code == 409 and error_code(r) == error_codes.LEASE_EXPIRED)
        if not expired:
            self.claimer.problem("unexpected answer to a confirmation", "POST", "", None, r, None, sent)
            rec["outcome"] = "unanswered"
            return
        rec["outcome"] = "confirm-expired"
        if self.before_expiry(rec, answered):
            rec["early"] = True
            self.violation("lease released early", rec, f"confirmation answered {r.status_code} before the expiry")
        self.log_write("confirm", "ack", {consumer: ()})
        self.check_gone_and_reclaim(rec, state)

    def release(self, rec: dict[str, Any], state: State) -> None:
        consumer = rec["consumer"]
        r, _, _ = self.insisting("release", "DELETE", f"/berth/leases/{consumer}")
        if r is None or r.status_code != 204:
            rec["outcome"] = "unanswered"
            self.claimer.unresolved.append(consumer)
            return
        rec["outcome"] = "released"
        self.log_write("release", "ack", {consumer: ()})
        self.check_gone_and_reclaim(rec, state)

    def check_gone_and_reclaim(self, rec: dict[str, Any], state: State) -> None:
        """Read back that the consumer holds nothing (the replay compares), then claim it again
        without a lease: a second release would take that claim away."""
        consumer = rec["consumer"]
        deadline = time.monotonic() + RESOLVE_GRACE
        while time.monotonic() < deadline:
            seen, _, _ = self.read(consumer)
            if seen is not None:
                self.log_observe(consumer, seen)
                if seen:
                    return  # the replay reports it; claiming over it would hide it
                break
            time.sleep(RETRY)
        else:
            return
        c = self.claimer
        c.write(
            "create", "PUT", f"/allocations/{consumer}", c.body(thaw(state), None), {consumer: state}, {consumer: None}
        )
        rec["reclaimed"] = consumer in c.owned

    # -- leases waiting for their expiry

    def tick(self) -> None:
        """Check the waiting leases whose time has come."""
        now = time.time()
        for entry in list(self.pending):
            if entry.get("next", 0.0) > now:
                continue
            self.check(entry)

    def drain(self) -> None:
        """Wait for every waiting lease to be settled (the end of the run)."""
        while self.pending:
            self.tick()
            if self.pending:
                time.sleep(0.1)

    def local(self, rec: dict[str, Any], db_moment: float, side: int) -> float:
        """This process's time when the database's clock shows ``db_moment``: at the latest (side 0)
        or at the earliest (side 1)."""
        assert self.offset is not None
        return db_moment - self.offset[side]

    def check(self, entry: dict[str, Any]) -> None:
        rec, state = entry["rec"], entry["state"]
        consumer = rec["consumer"]
        timed = rec["expires_at"] is not None and self.offset is not None
        if entry["phase"] == "kept":
            if not timed and "started" not in entry:
                entry["started"] = time.time()
                entry["next"] = time.time() + rec["seconds"] + KEPT_AFTER
                return
            if timed and time.time() < self.local(rec, rec["expires_at"] + KEPT_AFTER, 0):
                entry["next"] = self.local(rec, rec["expires_at"] + KEPT_AFTER, 0)
                return
            seen, _, _ = self.read(consumer)
            if seen is None:
                entry["next"] = time.time() + POLL
                return
            self.log_observe(consumer, seen)
            self.pending.remove(entry)
            if seen != state:
                rec["lost"] = True
                self.violation("confirmed lease released", rec, "the allocations were gone after the confirmation")
            else:
                self.claimer.owned[consumer] = {"state": state, "gen": self.generation}
            return
        if entry["phase"] == "before":
            if timed:
                at = self.local(rec, rec["expires_at"], 1) - 0.3
                if time.time() < at:
                    entry["next"] = at
                    return
                seen, _, answered = self.read(consumer)
                if seen is not None and self.before_expiry(rec, answered):
                    self.log_observe(consumer, seen)
                    rec["checked_before"] = True
                    if seen != state:
                        rec["early"] = True
                        self.violation("lease released early", rec, "the allocations were gone before the expiry")
            entry["phase"] = "after"
            entry["next"] = self.local(rec, rec["expires_at"], 0) if timed else time.time() + rec["seconds"] + 1
            entry["started"] = time.time()
            return
        # After the expiry: released now or later, until a read-back tells.
        if not entry.get("expiry_logged"):
            self.log_write("expiry", "expiry", {consumer: ()})
            entry["expiry_logged"] = True
        seen, sent, answered = self.read(consumer)
        if seen is None:
            entry["next"] = time.time() + POLL
            return
        self.log_observe(consumer, seen)
        if not seen:
            self.pending.remove(entry)
            rec["outcome"] = "expired"
            if timed:
                rec["delay"] = max(0.0, answered + self.offset[1] - rec["expires_at"])  # type: ignore[index]
            self.check_gone_and_reclaim(rec, state)
            return
        late_at = (
            self.local(rec, rec["expires_at"] + LATE_AFTER, 0)
            if timed
            else entry["started"] + rec["seconds"] + LATE_AFTER
        )
        if sent > late_at:
            self.pending.remove(entry)
            rec["outcome"] = "late"
            self.violation("lease released late", rec, f"still held {LATE_AFTER:g} s after its expiry")
            return
        entry["next"] = time.time() + POLL


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The counts of a run's lease records."""
    delays = [r["delay"] for r in records if r.get("delay") is not None]
    return {
        "taken": len(records),
        "to confirm": sum(1 for r in records if r["plan"] == "confirm"),
        "to expire": sum(1 for r in records if r["plan"] == "expire"),
        "to release": sum(1 for r in records if r["plan"] == "release"),
        "confirmed": sum(1 for r in records if r["outcome"] == "confirmed"),
        "confirmed but released": sum(1 for r in records if r.get("lost")),
        "confirm refused as expired": sum(1 for r in records if r["outcome"] == "confirm-expired"),
        "expired": sum(1 for r in records if r["outcome"] == "expired"),
        "released by the client": sum(1 for r in records if r["outcome"] == "released"),
        "checked before expiry": sum(1 for r in records if r.get("checked_before")),
        "released early": sum(1 for r in records if r.get("early")),
        "released late": sum(1 for r in records if r["outcome"] == "late"),
        "unsettled": sum(1 for r in records if r["outcome"] in (None, "unanswered")),
        "re-claimed": sum(1 for r in records if r["reclaimed"]),
        "max release delay": max(delays) if delays else None,
        "reclaimed consumers": sorted(r["consumer"] for r in records if r["reclaimed"]),
    }
