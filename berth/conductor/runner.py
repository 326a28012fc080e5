"""What every operation's steps share: the journal, the clients, the settings, and how a step is
run (the crash hook first, then the step, then its completion written)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from berth.clients.agent import AgentClient
from berth.clients.http import NotConnected, TransportError
from berth.conductor.errors import CannotGoOn, UnknownHost
from berth.conductor.fence import Fence
from berth.conductor.journal import DONE, FAILED, ROLLED_BACK, Journal, Operation
from berth.conductor.service import ServiceCalls
from berth.conductor.victims import VictimServers
from berth.scheduler.request.flavor import SchedulerConfig
from berth.scheduler.selector import Selector

# The selection counting the times conductors took the operation over from one that died.
TAKEN_OVER: Final = "taken_over"
# How the error of an operation whose resume failed begins (``Conductor.resume``).
RESUME_FAILED: Final = "resume failed"
# The selection listing the steps done, in order.
STEPS_DONE: Final = "steps_done"
# Why a clean-up left for a host that is down waits (its error while it does): shown with it.
WAITING_FOR_HOST: Final = "waiting for host {host} to be up again"
# Called with an operation as soon as its first row is written: the API answers with its id then,
# while the steps go on.
StartListener = Callable[[Operation], None]
# Called with the operation and the step about to run: a test stops an operation there by raising
# an exception the conductor does not handle (a BaseException), as if its process had died.
StepHook = Callable[[Operation, str], None]


@dataclass(frozen=True)
class ConductorConfig:
    # Hosts tried per build or move: the scheduler's choice and up to max_attempts - 1 alternates.
    max_attempts: int = 3
    # The lease covering the scheduler's claim until the agent's claim and the guest are done.
    lease_seconds: int = 600
    heartbeat_interval: float = 10.0
    # An owner silent for this long is dead: resume() takes its running operations over.
    dead_after: float = 60.0
    # A conductor whose heartbeat was not written for this long starts no step of its operations
    # (``berth.conductor.fence``); None: half of ``dead_after``, and no fence when that is not
    # above ``heartbeat_interval`` (a conductor told to take over at once, as tests make them).
    fence_after: float | None = None

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts is at least 1")
        if not 1 <= self.lease_seconds <= 86400:
            raise ValueError("lease_seconds is between 1 and 86400")
        if self.fence_after is not None and not self.heartbeat_interval < self.fence_after:
            raise ValueError("fence_after must be above heartbeat_interval")

    @property
    def fencing_after(self) -> float | None:
        """Seconds of silence after which the conductor fences itself off; None: never."""
        if self.fence_after is not None:
            return self.fence_after
        half = self.dead_after / 2
        return half if half > self.heartbeat_interval else None


class Runner:
    def __init__(
        self,
        journal: Journal,
        calls: ServiceCalls,
        agents: Mapping[str, AgentClient],
        selector: Selector,
        scheduler_config: SchedulerConfig,
        config: ConductorConfig,
        fence: Fence,
        hook: StepHook | None = None,
    ):
        self.journal = journal
        self.calls = calls
        self.agents = agents
        self.selector = selector
        self.scheduler_config = scheduler_config
        self.config = config
        # Shared by the runner's forks (``listening``): the owner name is the conductor's now.
        self.fence = fence
        self.hook = hook
        self.started: StartListener | None = None
        # The servers a preempting build's victims are looked up in (set by whoever makes the runner).
        self.victims: VictimServers | None = None

    @property
    def owner(self) -> str:
        """The name this conductor's operations are journaled under now."""
        return self.fence.owner

    def listening(self, started: StartListener) -> Runner:
        """This runner for one caller, who is told of the operation as soon as it is journaled."""
        forked = copy.copy(self)
        forked.started = started
        return forked

    def start(self, kind: str, instance_uuid: str, request: dict[str, Any]) -> Operation:
        """The operation's first row written (and, when a companion keeps servers, the server's
        operation slot taken, or refused)."""
        operation = self.journal.start(kind, instance_uuid, request, self.owner)
        if self.started is not None:
            self.started(operation)
        return operation

    def leave_clean_up(self, kind: str, operation: Operation, host: str, link: str, **request: Any) -> None:
        """What ``host``, down, still holds for ``operation``'s server left to a ``kind`` operation
        (naming ``operation`` as ``request[link]``), journaled before ``operation`` ends and owned by
        nobody: it waits until the host is up, when any conductor's resume carries it out. A
        conductor that dies between the two resumes ``operation``, which finds it there."""
        journal = self.journal
        if any(
            op.kind == kind and op.request.get(link) == operation.id
            for op in journal.for_instance(operation.instance_uuid)
        ):
            return
        request = {link: operation.id, "host": host, **request}
        clean_up = journal.start(kind, operation.instance_uuid, request, self.owner)
        journal.abandon(clean_up, WAITING_FOR_HOST.format(host=host))

    def host_back(self, clean_up: Operation) -> AgentClient | None:
        """The agent of the host a clean-up left by ``leave_clean_up`` waited for; None when the
        host was retired while it was down, the clean-up then ended failed (nothing is left to ask)."""
        try:
            return self.agent(str(clean_up.request["host"]))
        except UnknownHost as e:
            self.end(clean_up, FAILED, f"{e}; what it held for the server was not cleaned up")
            return None

    def agent(self, host: str) -> AgentClient:
        try:
            return self.agents[host]
        except KeyError:
            raise UnknownHost(f"no agent is known for host {host}") from None

    def reach(self, operation: Operation, step: str) -> None:
        """The point before ``step``: where a test may stop the operation, and where a conductor
        that may no longer act on it stops (``Fenced``)."""
        if self.hook is not None:
            self.hook(operation, step)
        self.fence.check(operation)

    def done(self, operation: Operation, step: str, *, write: bool = True, **selections: Any) -> None:
        """``step``'s effect is done: written before the next step starts. With ``write`` False it
        is written with the operation's next write instead (the next step's, an attempt's or the
        end), a transaction fewer: for the last step before the end, and for a step whose record
        changes nothing a resume does (it finishes or undoes the operation alike from the step
        before, which it must do anyway for a conductor killed between the step's effect and its
        write)."""
        operation.step = step
        operation.selections.update(selections)
        # The steps in the order they were done, for the operation's readers (a step done again,
        # a reschedule's, is listed again).
        operation.selections.setdefault(STEPS_DONE, []).append(step)
        if write:
            self.journal.save(operation)

    def run(self, operation: Operation, step: str, action: Callable[[], object], *, write: bool = True) -> None:
        self.reach(operation, step)
        action()
        self.done(operation, step, write=write)

    def carry_out(
        self,
        operation: Operation,
        steps: Callable[[], object],
        undo: Callable[[], object],
        forward_steps: tuple[str, ...],
        *,
        unanswered_goes_on: bool = False,
    ) -> Operation:
        """Run an operation's ``steps`` to the end; on a failure, ``undo`` what was done unless the
        operation got past the point of no return (a step of ``forward_steps``), where it is left for
        a resume to finish; one that ``CannotGoOn`` ends failed. ``unanswered_goes_on``: a request
        sent and never answered (the host may have done it: killed as it answered) leaves the
        operation to a resume too, for operations whose every step is harmless to repeat."""
        try:
            steps()
        except CannotGoOn as e:
            self.end(operation, FAILED, str(e))
            raise
        except Exception as e:
            unanswered = isinstance(e, TransportError) and not isinstance(e, NotConnected)
            if operation.step in forward_steps or (unanswered_goes_on and unanswered):
                self.journal.abandon(operation, f"finishing failed: {e}")
                raise
            self.fail(operation, e, undo)
            raise
        return self.end(operation, DONE)

    def fail(self, operation: Operation, error: Exception, undo: Callable[[], object]) -> None:
        """End the operation FAILED with ``error`` once ``undo`` gave back what it held. When the
        undo fails too (an agent that does not answer), the operation is left for a resume to undo,
        with both errors, and ``error`` is raised: not as if its conductor had died."""
        try:
            undo()
        except Exception as undoing:
            self.journal.abandon(operation, f"{error}; undoing it failed: {undoing}")
            raise error from undoing
        self.end(operation, FAILED, str(error))

    def rolled_back(self, operation: Operation, died: str) -> Operation:
        """End an operation a resume undid, saying why it was left: the error it was abandoned
        with when it failed and its undo failed too (``fail``), else ``died`` (its conductor died
        at that point; an earlier resume's failure is not why)."""
        error = operation.error
        why = error if error and not error.startswith(RESUME_FAILED) else died
        return self.end(operation, ROLLED_BACK, why)

    def end(self, operation: Operation, state: str, error: str | None = None) -> Operation:
        operation.state = state
        operation.error = error
        self.journal.save(operation)
        return operation
