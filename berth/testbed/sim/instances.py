"""What the simulation believes of each instance: its flavor, its host, its state, the move in
flight, and its server group; and how a conductor operation's outcome changes it.

The belief comes from the operations' journaled outcomes alone (the host a build landed on, the
destination of a move, ...), never from the books the invariants then check against it.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Final

from berth.conductor.journal import DONE, RUNNING, Operation
from berth.conductor.requests import ServerRequest

ACTIVE: Final = "active"
SOFT_DELETED: Final = "soft_deleted"
SHELVED: Final = "shelved"
OFFLOADED: Final = "offloaded"
RESIZED: Final = "resized"  # a resize or cold migration awaiting confirm or revert
DELETED: Final = "deleted"
# An evacuation that failed: the instance stays on its (dead, then back) host, in the conductors'
# ERROR, until it is rebuilt, evacuated again or deleted.
ERROR: Final = "error"
# A delete that failed after one of its steps (an agent killed under it, say): what the instance
# still holds is the delete's to give back, so the only thing asked of it is the delete, again.
DELETING: Final = "deleting"
# The operations that end a move awaiting confirm or revert.
FINISHING: Final = ("confirm_resize", "revert_resize")
# What each state allows next (the operations' names are the conductor's).
ALLOWED: Final[dict[str, tuple[str, ...]]] = {
    ACTIVE: ("delete", "soft_delete", "resize", "migrate", "live_migrate", "shelve", "rebuild", "evacuate"),
    SOFT_DELETED: ("restore", "delete"),
    SHELVED: ("shelve_offload", "unshelve", "delete"),
    OFFLOADED: ("unshelve", "delete"),
    # Deleted as the servers API deletes one: its move confirmed first.
    RESIZED: ("confirm_resize", "revert_resize", "delete"),
    DELETING: ("delete",),
    ERROR: ("rebuild", "delete"),
    DELETED: (),
}


@dataclass(frozen=True)
class Move:
    """A move in flight: the migration consumer holds the old flavor's allocations on the source."""

    id: str
    migration: str
    source: str
    old: ServerRequest
    # A confirm or revert that failed after some of its steps were done: the move is half finished,
    # and only the same operation, asked again, may finish it (the conductor's rule: "confirm again").
    finishing: str | None = None


@dataclass(frozen=True)
class Instance:
    server: ServerRequest
    state: str
    host: str | None
    move: Move | None = None
    group: str | None = None
    # An operation left running (past its point of no return, or its conductor killed): what
    # the instance is waits for its resume.
    pending: str | None = None


@dataclass
class Instances:
    """Every instance the run made, under one lock; each is taken by one operation at a time."""

    # The instances not deleted; the deleted ones apart, so that the draws of the workload (which
    # go over every instance) do not grow with the operations run.
    items: dict[str, Instance] = field(default_factory=dict)
    deleted: dict[str, Instance] = field(default_factory=dict)
    busy: set[str] = field(default_factory=set)
    # Hosts taken down: their instances wait, untouched, until they are back.
    down: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # The instances not deleted by state, each a list to draw from at random and its members'
    # places in it: an operation's draw looks at a few instances, not at every one.
    by_state: dict[str, list[str]] = field(default_factory=dict)
    _places: dict[str, int] = field(default_factory=dict)

    def take(self, uuid: str) -> bool:
        with self.lock:
            if uuid in self.busy:
                return False
            self.busy.add(uuid)
            return True

    def free(self, uuid: str) -> None:
        with self.lock:
            self.busy.discard(uuid)

    def put(self, instance: Instance) -> None:
        uuid = instance.server.instance_uuid
        with self.lock:
            before = self.items.get(uuid)
            if before is not None and before.state != instance.state:
                self._unfile(uuid, before.state)
            if instance.state == DELETED:
                self.items.pop(uuid, None)
                self.deleted[uuid] = instance
                return
            self.items[uuid] = instance
            if before is None or before.state != instance.state:
                members = self.by_state.setdefault(instance.state, [])
                self._places[uuid] = len(members)
                members.append(uuid)

    def _unfile(self, uuid: str, state: str) -> None:
        members = self.by_state[state]
        place = self._places.pop(uuid)
        last = members.pop()
        if last != uuid:
            members[place] = last
            self._places[last] = place

    def _is_idle(self, uuid: str, instance: Instance) -> bool:
        return (
            uuid not in self.busy
            and instance.pending is None
            and instance.host not in self.down
            and (instance.move is None or instance.move.source not in self.down)
        )

    def states(self) -> set[str]:
        """The states some instance not deleted is in (idle or not)."""
        with self.lock:
            return {state for state, members in self.by_state.items() if members}

    def take_one(
        self, states: tuple[str, ...], rng: random.Random, accept: Callable[[Instance], bool], draws: int = 16
    ) -> Instance | None:
        """An idle instance in one of ``states`` that ``accept``s, drawn at random (each such
        instance as likely as the others) and taken; None when there is none."""
        with self.lock:
            groups = [self.by_state.get(state, []) for state in states]
            sizes = [len(members) for members in groups]
            total = sum(sizes)
            if not total:
                return None
            for _ in range(min(draws, total)):
                index = rng.randrange(total)
                for members, size in zip(groups, sizes, strict=True):
                    if index < size:
                        uuid = members[index]
                        break
                    index -= size
                instance = self.items[uuid]
                if self._is_idle(uuid, instance) and accept(instance):
                    self.busy.add(uuid)
                    return instance
            # Few of them can be taken: look at all of them.
            fitting = [
                (uuid, self.items[uuid])
                for members in groups
                for uuid in members
                if self._is_idle(uuid, self.items[uuid]) and accept(self.items[uuid])
            ]
            if not fitting:
                return None
            uuid, instance = rng.choice(fitting)
            self.busy.add(uuid)
            return instance

    def every(self) -> dict[str, Instance]:
        """Every instance the run made, deleted ones included."""
        with self.lock:
            return {**self.deleted, **self.items}

    def idle(self, states: tuple[str, ...] | None = None) -> list[Instance]:
        with self.lock:
            return [i for u, i in self.items.items() if (states is None or i.state in states) and self._is_idle(u, i)]

    def on_host(self, host: str) -> list[Instance]:
        with self.lock:
            return [i for i in self.items.values() if i.host == host and i.state != DELETED]

    def involving(self, host: str) -> list[Instance]:
        """The instances on ``host`` and those whose move in flight came from it."""
        with self.lock:
            return [
                i
                for i in self.items.values()
                if i.state != DELETED and (i.host == host or (i.move is not None and i.move.source == host))
            ]

    def half_deleted(self) -> list[Instance]:
        """Instances whose delete failed midway, not taken by an operation."""
        with self.lock:
            return [
                i for u, i in self.items.items() if u not in self.busy and i.pending is None and i.state == DELETING
            ]

    def half_finished(self) -> list[Instance]:
        """Moves whose confirm or revert failed midway, not taken by an operation."""
        with self.lock:
            return [
                i
                for u, i in self.items.items()
                if u not in self.busy and i.pending is None and i.move is not None and i.move.finishing
            ]


def outcome(instance: Instance | None, kind: str, operation: Operation, extra: dict[str, Any]) -> Instance | None:
    """The instance after ``operation`` (of ``kind``) ended as the journal says; None: there is none.

    A failed or rolled back operation changes nothing (the conductor undid it), but a failed build
    leaves no instance and a failed evacuation leaves it in ERROR. A running one (left for a
    resume) marks the instance pending.

    An instance whose delete failed midway stays to be deleted again when an evacuation of it
    fails: the conductors evacuate every server their rows put on a host that is down, one whose
    delete failed too (its row is left as it was, the error as its fault), and the evacuation
    undone gives back only what it took. What the books hold for it is still what the failed delete
    left, which may be nothing (its host's agent finishes a delete it had begun when it starts
    again), not the allocations ERROR expects.
    """
    if operation.state == RUNNING:
        return replace(instance, pending=operation.id) if instance else None
    if operation.state != DONE:
        if kind in FINISHING and operation.step and instance is not None and instance.move is not None:
            return replace(instance, move=replace(instance.move, finishing=kind))
        if kind == "delete" and operation.step and instance is not None:
            return replace(instance, state=DELETING)
        if kind == "evacuate" and instance is not None and instance.state != DELETING:
            return replace(instance, state=ERROR)
        return None if kind == "build" else instance
    changed = _done(instance, kind, operation, extra)
    return replace(changed, pending=None) if changed else None


def _done(instance: Instance | None, kind: str, operation: Operation, extra: dict[str, Any]) -> Instance | None:
    s = operation.selections
    if kind in ("build", "unshelve") and "server" in extra:
        server: ServerRequest = extra["server"]
        group = instance.group if instance else extra.get("group")
        return Instance(server, ACTIVE, str(s.get("host")) if s.get("host") else _host(instance), group=group)
    assert instance is not None
    if kind == "unshelve":  # still on its host
        return replace(instance, state=ACTIVE)
    if kind in ("resize", "migrate"):
        wanted = ServerRequest.from_dict(operation.request["server"])
        move = Move(
            operation.id, str(operation.request["migration_uuid"]), str(operation.request["source"]), instance.server
        )
        return replace(instance, server=wanted, state=RESIZED, host=str(s["dest"]), move=move)
    if kind == "confirm_resize":
        return replace(instance, state=ACTIVE, move=None)
    if kind == "revert_resize":
        assert instance.move is not None
        return replace(instance, server=instance.move.old, state=ACTIVE, host=instance.move.source, move=None)
    if kind == "live_migrate":
        return replace(instance, host=str(s["dest"]))
    if kind == "evacuate":  # from ERROR too
        return replace(instance, state=ACTIVE, host=str(s["dest"]))
    states = {
        "delete": DELETED,
        "soft_delete": SOFT_DELETED,
        "restore": ACTIVE,
        "shelve": SHELVED,
        "shelve_offload": OFFLOADED,
        "rebuild": ACTIVE,
    }
    state = states[kind]
    host = None if state in (DELETED, OFFLOADED) else instance.host
    return replace(instance, state=state, host=host, move=None if state == DELETED else instance.move)


def _host(instance: Instance | None) -> str | None:
    return instance.host if instance else None
