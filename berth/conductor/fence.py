"""A conductor's right to act on the operations it owns, and how it gives that right up.

Another conductor takes over the running operations of an owner silent for ``dead_after`` seconds
(``Conductor.resume``). A conductor that is alive but cannot write its heartbeat (its database
unreachable from it alone, its process paused) would otherwise go on with the steps of those
operations beside their new owner, as far as its next journal write, and several steps in a row
write nothing (a move's ``move_out``, ``release_reservation`` and destination claim: a claim the
new owner's undo never sees). So a conductor fences itself off first:

- once its last heartbeat written is older than ``fence_after`` (less than ``dead_after``: it stops
  before anyone may take over), no step of its operations starts: ``Fenced`` is raised there, as if
  the process had died, and the operation is left as its journal row says;
- the next heartbeat it writes after such a silence is under a new owner name. The operations of
  the old name get no heartbeat from then on, so that any conductor (this one too) resumes them once
  they have been silent for ``dead_after``, and the steps still under way in this process under the
  old name stop at their next start (``Fenced``).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

from berth.conductor.journal import Operation, TakenOver


def new_owner() -> str:
    return f"conductor-{uuid.uuid4()}"


class Fenced(TakenOver):
    """The conductor gave up its right to act on the operation (see the module's text). A
    ``TakenOver``: its failure path does not run (an undo would run beside the new owner's work)."""

    def __init__(self, operation: Operation, why: str):
        super().__init__(operation)
        self.args = (f"operation {operation.id} left to the conductors' resume: {why}",)


class Fence:
    """The owner name a conductor acts under, and whether it may still act under it.

    Any silence past ``fence_after`` retires the name for good, however it ends: a heartbeat that
    is written late (its statement waited on the database) may find operations taken over already,
    and another step under the old name could run beside their new owner's.
    """

    def __init__(self, owner: str, fence_after: float | None, clock: Callable[[], float] = time.monotonic):
        """``fence_after`` None: never fenced (the owner name never changes)."""
        self.owner = owner
        self.fence_after = fence_after
        self._clock = clock
        self._lock = threading.Lock()
        self._last_beat = clock()
        # Until its heartbeat runs, a conductor (a library's, a test's) is never fenced.
        self._armed = False
        self._retired = False

    def arm(self) -> None:
        """The heartbeat starts now: from here on, a silence fences."""
        with self._lock:
            self._last_beat = self._clock()
            self._armed = True

    def silent_for(self) -> float:
        """Seconds since the last heartbeat written in time (or since the heartbeat started)."""
        return self._clock() - self._last_beat

    def before_beat(self) -> str:
        """The owner name the heartbeat about to be written is for: a new one once the name was
        retired, whose operations are then left to be resumed."""
        with self._lock:
            if self._retire_if_silent():
                self.owner = new_owner()
                self._retired = False
                self._last_beat = self._clock()
            return self.owner

    def beaten(self, owner: str) -> None:
        """The heartbeat of ``owner`` was written now."""
        with self._lock:
            if owner == self.owner and not self._retire_if_silent():
                self._last_beat = self._clock()

    def check(self, operation: Operation) -> None:
        """Raise ``Fenced`` unless the conductor may start a step of ``operation`` now."""
        with self._lock:
            if operation.owner != self.owner:
                raise Fenced(operation, f"its conductor now acts as {self.owner}, after a silence")
            if self._retire_if_silent():
                raise Fenced(operation, f"its conductor wrote no heartbeat in time ({self.silent_for():.1f} s)")

    def _retire_if_silent(self) -> bool:
        """Whether the name is retired, now or before (under the lock)."""
        if self._armed and self.fence_after is not None and self.silent_for() > self.fence_after:
            self._retired = True
        return self._retired
