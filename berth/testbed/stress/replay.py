"""One claimer's log replayed: which states of its consumers the log allows, at each read-back and at
the end.

A *world* is one assignment of states to the claimer's consumers that the log permits: an
acknowledged write sets its consumers in every world, a refused one changes nothing, an uncertain
one doubles the worlds (applied as a whole, or not at all).  A lease's expiry (``EXPIRY``) releases
its consumer at some moment from then on, until the consumer is written again: a read-back may find
it held, and a later one released.  A read-back or the final state must match at least one world.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from berth.testbed.stress.audit import violation
from berth.testbed.stress.claimer import Outcome
from berth.testbed.stress.states import State, show

MAX_WORLDS = 256

World = dict[str, State]


def _key(world: World) -> tuple[tuple[str, State], ...]:
    return tuple(sorted((c, s) for c, s in world.items() if s))


def _dedupe(worlds: list[World]) -> list[World]:
    seen, out = set(), []
    for w in worlds:
        k = _key(w)
        if k not in seen:
            seen.add(k)
            out.append(w)
    return out


def _matches(world: World, seen: World) -> bool:
    return all(world.get(c, ()) == s for c, s in seen.items())


class Replay:
    """The worlds of one claimer's log, event by event, and what contradicts them."""

    def __init__(self, index: int, t0: float):
        self.index = index
        self.t0 = t0
        self.worlds: list[World] = [{}]
        self.last_write: dict[str, tuple[int, str, str, float]] = {}
        self.violations: list[dict[str, Any]] = []
        self.notes: Counter[str] = Counter()
        self.expiring: set[str] = set()  # consumers whose lease has expired and may be released any time

    def write(self, seq: int, at: float, kind: str, outcome: str, changes: World) -> None:
        for consumer in changes:
            self.last_write[consumer] = (seq, kind, outcome, at)
        if outcome == Outcome.EXPIRY:
            self.expiring |= set(changes)
            return
        self.expiring -= set(changes)
        if outcome == Outcome.ACK:
            for w in self.worlds:
                w.update(changes)
        elif outcome == Outcome.UNCERTAIN:
            self.notes["uncertain writes"] += 1
            self.worlds = _dedupe(self.worlds + [{**w, **changes} for w in self.worlds])
            if len(self.worlds) > MAX_WORLDS:
                self.notes["worlds capped"] += 1
                self.worlds = self.worlds[:MAX_WORLDS]

    def _released(self, seen: World) -> None:
        """Worlds in which the expired leases among ``seen`` have been released by now."""
        released = {c: () for c in seen if c in self.expiring}
        if released:
            self.worlds = _dedupe(self.worlds + [{**w, **released} for w in self.worlds])
            self.expiring -= {c for c, s in seen.items() if c in released and not s}

    def observe(self, seq: int, seen: World) -> None:
        self._released(seen)
        kept = [w for w in self.worlds if _matches(w, seen)]
        if not kept:
            self.explain(seen, "read-back", seq)
            kept = _dedupe([{**w, **seen} for w in self.worlds])  # carry on from what the server holds
        self.worlds = kept

    def final(self, actual: dict[str, State], seq: int) -> None:
        seen = {c: actual.get(c, ()) for c in self.last_write}
        self._released(seen)
        if not any(_matches(w, seen) for w in self.worlds):
            self.explain(seen, "final audit", seq)

    def _contradiction(self, consumer: str, state: State) -> str | None:
        allowed = {w.get(consumer, ()) for w in self.worlds}
        if state in allowed:
            return None
        lw = self.last_write.get(consumer)
        how = f"last write #{lw[0]} {lw[1]} ({lw[2]}) at {lw[3] - self.t0:.2f}s" if lw else "never written"
        return (
            f"consumer {consumer} holds [{show(state)}] but the log allows only "
            f"{' or '.join('[' + show(a) + ']' for a in sorted(allowed))}; {how}"
        )

    def explain(self, seen: World, when: str, seq: int) -> None:
        lines = [line for c, s in sorted(seen.items()) if (line := self._contradiction(c, s))]
        if not lines:
            lines.append(
                "the consumers hold a mix of old and new states of one uncertain write: "
                + "; ".join(f"{c} [{show(s)}]" for c, s in sorted(seen.items()))
            )
        kind = "read-back contradicts the log" if when == "read-back" else "final state contradicts the log"
        for line in lines:
            self.violations.append(violation(kind, f"claimer {self.index}, {when} #{seq}: {line}"))


def replay(
    index: int, events: list[tuple[Any, ...]], actual: dict[str, State] | None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Check one claimer's read-backs, and its consumers' final state against what its log allows."""
    state = Replay(index, events[0][2] if events else 0)
    for event in events:
        if event[0] == "write":
            _, seq, at, kind, outcome, changes = event
            state.write(seq, at, kind, outcome, changes)
        else:
            _, seq, _, seen = event
            state.observe(seq, seen)
    if actual is not None:
        state.final(actual, len(events))
    return state.violations, {"consumers": set(state.last_write), "notes": state.notes}
