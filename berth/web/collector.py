"""Python's cycle collector held off while a request runs, and let run between requests.

A request that answers with a thousand allocation candidates builds tens of thousands of objects
that all live until its answer is written.  With the collector's default thresholds, every 700 new
objects start a collection, and every tenth and hundredth of those walks all the objects the request
has built so far, again and again: in process, an unlimited candidate request spent about a third of
its CPU in the collector.  Nearly everything a request builds is freed by reference counting as soon
as the answer is sent, so the collector loses nothing by waiting for the end of the request; the few
reference cycles a request leaves behind are collected then, by the collector's usual thresholds.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

# With several threads per worker, requests can overlap without end, and the collector would then
# never run: past this many new objects, the last request to finish collects anyway.
MOST_OBJECTS_WITHOUT_COLLECTION = 500_000


class CollectorPausedDuringRequests:
    """WSGI middleware: the cycle collector is disabled while any request of this process runs."""

    def __init__(self, app: WSGIApplication):
        self.app = app
        self._lock = threading.Lock()
        self._running = 0
        self._was_enabled = False

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        with self._lock:
            if self._running == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._running += 1
        try:
            return self.app(environ, start_response)
        finally:
            with self._lock:
                self._running -= 1
                if self._running == 0:
                    if self._was_enabled:
                        gc.enable()
                elif self._was_enabled and gc.get_count()[0] > MOST_OBJECTS_WITHOUT_COLLECTION:
                    gc.collect()
