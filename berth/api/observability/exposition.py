"""A scrape's answer: the counted metrics (this process's, or every worker's) and the cloud's figures,
read from the database as the scrape asks."""

from __future__ import annotations

import contextlib
import glob
import os
import re
from collections.abc import Iterable
from typing import Final

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector

from berth.api.observability import metrics
from berth.api.observability.multiprocess_dir import MULTIPROCESS_DIR_VARIABLE
from berth.store.database import Database
from berth.store.observability.cloud_figures import cloud_figures

# The files of gauges that count only while their process lives (``livesum``), named by its pid.
_LIVE_GAUGE_FILE: Final = re.compile(r"gauge_live\w+?_(\d+)\.db\Z")


class CloudFiguresCollector(Collector):
    """``berth_capacity``, ``berth_used`` and ``berth_free`` per resource class, and the counts of
    providers, consumers and outstanding leases: one read of the database per scrape."""

    def __init__(self, db: Database):
        self.db = db

    def collect(self) -> Iterable[Metric]:
        figures = self.db.read(cloud_figures)
        families = {
            "capacity": GaugeMetricFamily(
                "berth_capacity",
                "Units that may be allocated, (total - reserved) x allocation ratio, summed over inventories.",
                labels=["resource_class"],
            ),
            "used": GaugeMetricFamily(
                "berth_used", "Units allocated, summed over inventories.", labels=["resource_class"]
            ),
            "free": GaugeMetricFamily("berth_free", "Capacity less usage.", labels=["resource_class"]),
        }
        for name, figure in figures.by_class.items():
            families["capacity"].add_metric([name], figure.capacity)
            families["used"].add_metric([name], figure.used)
            families["free"].add_metric([name], figure.free)
        yield from families.values()
        yield GaugeMetricFamily("berth_providers", "Resource providers.", value=figures.providers)
        yield GaugeMetricFamily("berth_consumers", "Consumers (holders of allocations).", value=figures.consumers)
        yield GaugeMetricFamily(
            "berth_leases_outstanding",
            "Claim leases neither confirmed nor released yet, expired ones awaiting the reaper included.",
            value=figures.leases_outstanding,
        )


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
    """What ``GET /metrics`` answers for the application over ``db``."""

    def __init__(self, db: Database):
        self.registry = CollectorRegistry(auto_describe=False)
        self.directory = os.environ.get(MULTIPROCESS_DIR_VARIABLE) if metrics.MULTIPROCESS else None
        if self.directory is not None:
            MultiProcessCollector(self.registry, self.directory)  # type: ignore[no-untyped-call]  # unannotated
        else:
            self.registry.register(_Counted())
        self.registry.register(CloudFiguresCollector(db))

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
