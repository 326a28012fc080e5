"""The reaper: a daemon thread of each server worker that releases expired claim leases.

Every worker runs one, so that leases expire as long as any worker lives, with no cron outside the
service; ``store.ledger.reap_expired`` makes concurrent passes release each lease once.  The state
is the database's alone, so a lease that expires while the service is down is released by the first
pass after it starts again.
"""

from __future__ import annotations

import logging
import random
import threading
from typing import Final

from berth.domain.errors import Unavailable
from berth.store.database import Database
from berth.store.leases import ledger

LOG = logging.getLogger(__name__)

DEFAULT_INTERVAL_S: Final = 5.0
# Leases released per transaction: a pass that finds more runs again at once, so that no write
# transaction holds its locks for long.
BATCH: Final = 200


class LeaseReaper:
    """Releases expired leases every ``interval`` seconds until ``stop``."""

    def __init__(self, db: Database, interval: float = DEFAULT_INTERVAL_S):
        if interval <= 0:
            raise ValueError(f"the lease check interval must be positive, not {interval!r}")
        self.db = db
        self.interval = interval
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> LeaseReaper:
        self._thread = threading.Thread(target=self._run, name="berth-lease-reaper", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        # Workers started together would otherwise pass together: a random first wait spreads them.
        delay = random.uniform(0, self.interval)
        while not self._stopping.wait(delay):
            try:
                self.reap()
            except Unavailable as e:  # a database restarting or failing over: said in a line
                LOG.warning(
                    "releasing expired leases failed (%s: %s); trying again in %g s", e, e.__cause__, self.interval
                )
            except Exception:  # noqa: BLE001 - a failed pass must not end the thread; the next one retries
                LOG.exception("releasing expired leases failed; trying again in %g s", self.interval)
            delay = self.interval

    def reap(self) -> list[str]:
        """One pass: release every lease expired by now, in transactions of at most ``BATCH``."""
        released: list[str] = []
        while not self._stopping.is_set():
            batch = self._reap_batch()
            released += batch
            if len(batch) < BATCH:
                break
        return released

    def _reap_batch(self) -> list[str]:
        # "Expired" by the database's clock, read by the statements themselves (ledger.clock).
        if not self.db.read(ledger.has_expired_leases):
            return []
        batch = self.db.write(lambda conn: ledger.reap_expired(conn, limit=BATCH))
        if batch:
            LOG.info("released the allocations of expired leases (%d): %s", len(batch), ", ".join(batch))
        return batch
