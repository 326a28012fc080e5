"""``Background``: operations run on a pool of threads, each caller waiting only until its
operation is journaled (or refused before that), so that an API request is answered with the
operation's id at once while its steps go on."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Final

from berth.conductor.journal import RUNNING, Operation, TakenOver
from berth.conductor.runner import Runner

LOG = logging.getLogger(__name__)

# How long a caller waits for its operation's first row (the reads before it included).
START_TIMEOUT: Final = 120.0


class Background:
    def __init__(self, runner: Runner, threads: int):
        self.runner = runner
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="operation")

    def start(self, work: Callable[[Runner], Operation]) -> Operation:
        """``work`` run on the pool with a runner of its own; the operation as first journaled. What
        ``work`` raises before that is raised here (nothing was written); after, the journal keeps it."""
        started: Future[Operation] = Future()

        def first_row(operation: Operation) -> None:
            if not started.done():
                started.set_result(operation)

        runner = self.runner.listening(first_row)

        def run() -> None:
            try:
                operation = work(runner)
            except BaseException as error:  # noqa: BLE001 - handed to the caller, or kept in the journal
                if not started.done():
                    started.set_exception(error)
                else:
                    self._left_running(started.result(), error)
                return
            if not started.done():
                started.set_result(operation)

        # The work carries the request's id (``berth.clients.request_ids``) into its own thread.
        self.pool.submit(contextvars.copy_context().run, run)
        return started.result(timeout=START_TIMEOUT)

    def _left_running(self, operation: Operation, error: BaseException) -> None:
        """An operation that raised after its first row: journaled as ended, or (its undo failed too,
        a host away) still running under this live conductor, whose heartbeat would keep everyone
        else from it for ever. Such a one is abandoned: the next resume of any conductor finishes or
        undoes it."""
        if isinstance(error, TakenOver):
            LOG.warning(
                "operation %s %s stopped: %s; its new owner finishes or undoes it", operation.kind, operation.id, error
            )
            return
        journal = self.runner.journal
        current = journal.get(operation.id)
        if current is None or current.state != RUNNING or current.owner != self.runner.owner:
            LOG.info("operation ended with an error (journaled): %s", error)
            return
        LOG.warning(
            "operation %s %s failed and was not undone (%s); left for a resume", current.kind, current.id, error
        )
        journal.abandon(current, f"failed and not undone: {error}")

    def close(self, wait: bool = False) -> None:
        self.pool.shutdown(wait=wait, cancel_futures=True)
