"""The cloud's figures as metrics, read from the database at each scrape."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from berth.domain.errors import Unavailable
from berth.store.database import Database
from berth.store.observability.cloud_figures import cloud_figures

LOG = logging.getLogger(__name__)


class CloudFiguresCollector(Collector):
    """``berth_capacity``, ``berth_used`` and ``berth_free`` per resource class, and the counts of
    providers, consumers and outstanding leases: one read of the database per scrape."""

    def __init__(self, db: Database):
        self.db = db

    def collect(self) -> Iterable[Metric]:
        try:
            figures = self.db.read(cloud_figures)
        except Unavailable as error:
            # The scrape still answers what was counted (the 503s of the outage among it): failing
            # it whole would hide those from the dashboards and alerts exactly when they matter.
            LOG.warning("the cloud's figures are left out of this scrape: %s", error)
            return
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
