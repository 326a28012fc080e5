"""A scrape's answer: the counted metrics (this process's, or every worker's) and whatever a service
adds, read as the scrape asks (the Placement service: the cloud's figures)."""

from __future__ import annotations

import contextlib
import glob
import os
import re
from collections.abc import Iterable
from typing import Final

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector

from berth.web.observability import metrics
from berth.web.observability.multiprocess_dir import MULTIPROCESS_DIR_VARIABLE

# The files of gauges that count only while their process lives (``livesum``), named by its pid.
_LIVE_GAUGE_FILE: Final = re.compile(r"gauge_live\w+?_(\d+)\.db\Z")


def forget_dead_processes(directory: str) -> None:
    """Drop the live gauges of processes that are gone (a worker that died and was started again),
    which would otherwise count forever; their counters stay, as counts of what they served."""
    for path in glob.glob(os.path.join(directory, "gauge_live*.db")):
        found = _LIVE_GAUGE_FILE.search(os.path.basename(path))
        if found is None:
            continue
        pid = int(found.group(1))
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            with contextlib.suppress(FileNotFoundError):  # another worker's scrape got there first
                mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]  # unannotated in the library
        except PermissionError:
            pass  # alive, under another user


class Exposition:
    """What ``GET /metrics`` answers: the counted metrics, then those of ``collectors``."""

    def __init__(self, collectors: Iterable[Collector] = ()):
        self.registry = CollectorRegistry(auto_describe=False)
        self.directory = os.environ.get(MULTIPROCESS_DIR_VARIABLE) if metrics.MULTIPROCESS else None
        if self.directory is not None:
            MultiProcessCollector(self.registry, self.directory)  # type: ignore[no-untyped-call]  # unannotated
        else:
            self.registry.register(_Counted())
        for collector in collectors:
            self.registry.register(collector)

    def render(self, accept: str | None) -> tuple[bytes, str]:
        """The text of every metric, in the format ``accept`` asks for (Prometheus's by default),
        and its content type."""
        if self.directory is not None:
            forget_dead_processes(self.directory)
        encode, content_type = choose_encoder(accept or "")
        return encode(self.registry), content_type


class _Counted(Collector):
    """The metrics this process counted, when it counts for itself alone."""

    def collect(self) -> Iterable[Metric]:
        return metrics.REGISTRY.collect()
