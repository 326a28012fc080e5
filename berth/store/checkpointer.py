"""SQLite's checkpoints made by a thread of each writing process, outside the writers' lock.

In WAL mode a commit appends the pages it changed to the write-ahead log, and a checkpoint copies
them back into the database file. By default the commit that finds the log past 1,000 pages makes
that checkpoint itself: it copies megabytes and waits for two fsyncs while it still holds the lock
every other writer of the file waits for. The commit of a gang of 100 members (300 allocations, 100
consumers, the indexes' pages they touch) took 12.6 ms on average that way, 6.5 ms without the
checkpoints, at 10,000 hosts (by hand, in process: docs/performance.md).

A PASSIVE checkpoint waits for no reader and stops no writer, so a daemon thread of each process
that writes makes one every ``CHECKPOINT_SECONDS``, on a connection of its own. The commits keep
their own checkpoint for a log past ``BACKSTOP_PAGES`` (``PRAGMA wal_autocheckpoint``, set on every
connection): a thread that falls behind, or a process that writes without one, still bounds the log.
Several processes' threads may try at once; SQLite lets one checkpoint run and the others return.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from typing import Final

LOG = logging.getLogger(__name__)

CHECKPOINT_SECONDS: Final = 0.2
# 40 MB of log at the default page size: well past what the thread leaves behind between two passes.
BACKSTOP_PAGES: Final = 10_000


class Checkpointer:
    """The checkpoint thread of one SQLite file in this process, started by the first write."""

    def __init__(self, path: str, busy_timeout_s: float):
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self.passes = 0
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._stop = threading.Event()

    def ensure_running(self) -> None:
        """Start the thread in this process if it has none (a forked worker inherits no thread)."""
        if self._pid == os.getpid():
            return
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
            self._stop = threading.Event()
            threading.Thread(target=self._run, args=(self._stop,), name="berth-sqlite-checkpoint", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        self._pid = None

    def _run(self, stop: threading.Event) -> None:
        try:
            connection = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None)
        except sqlite3.Error:
            LOG.exception("cannot open %s to checkpoint it; its commits will", self.path)
            return
        try:
            while not stop.wait(CHECKPOINT_SECONDS):
                try:
                    connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.passes += 1
                except sqlite3.Error:  # e.g. the file removed under a test: the next pass tries again
                    LOG.debug("checkpointing %s failed", self.path, exc_info=True)
        finally:
            connection.close()
