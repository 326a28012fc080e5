"""``Ends``: the run's wait for its operations to end, read from the conductors' journal.

The simulation is a test bench and may read the conductors' database. One thread reads, every
``INTERVAL`` seconds, the rows of every operation some worker waits for, in one query, and wakes
the workers whose operation ended. Asking the API instead (``GET /operations/{id}`` from each worker
until its operation ends) would cost the conductors a request per look, in the control plane's
CPU that the run measures; the query costs the run's own process, once for every waiter at a time.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Final

import sqlalchemy as sa

from berth.conductor.journal import RUNNING, Journal, Operation, operations

LOG = logging.getLogger(__name__)

INTERVAL: Final = 0.02


class Ends:
    def __init__(self, journal: Journal):
        self.journal = journal
        self._waiting: dict[str, tuple[threading.Event, list[Operation]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sim-operation-ends", daemon=True)
        self._thread.start()

    def wait(self, operation_id: str, timeout: float) -> Operation | None:
        """The operation as it ended; None if it is still running after ``timeout`` seconds."""
        event, found = threading.Event(), list[Operation]()
        with self._lock:
            self._waiting[operation_id] = (event, found)
        ended = event.wait(timeout)
        with self._lock:
            self._waiting.pop(operation_id, None)
        return found[0] if ended and found else None

    def _run(self) -> None:
        while not self._stop.wait(INTERVAL):
            with self._lock:
                ids = list(self._waiting)
            if not ids:
                continue
            query = operations.select().where(operations.c.id.in_(ids), operations.c.state != RUNNING)
            try:
                with self.journal.engine.connect() as conn:
                    rows = conn.execute(query).mappings().all()
            except sa.exc.DBAPIError as e:  # a database restarted or failing over: look again
                LOG.info("reading the journal failed (%s); trying again", e)
                time.sleep(0.5)
                continue
            with self._lock:
                for row in rows:
                    waiter = self._waiting.get(row["id"])
                    if waiter is not None:
                        waiter[1].append(Operation.from_row(row))
                        waiter[0].set()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
