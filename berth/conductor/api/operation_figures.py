"""The journal's operations as metrics, read from the database at each scrape (so that every
conductor answers the cloud's figures, whichever one is scraped): how many ended by kind and
outcome, how long they took (a histogram per kind and outcome, its buckets counted in SQL), how many
run now, and the reschedules and take-overs they went through."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from typing import Final

import sqlalchemy as sa
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from berth.conductor.api.handlers.operations import KINDS
from berth.conductor.control.plane import ControlPlane
from berth.conductor.journal import DONE, RUNNING, connection_lost, operations
from berth.conductor.runner import TAKEN_OVER

LOG = logging.getLogger(__name__)

# Upper bounds of the durations' buckets, in seconds: a build on a fake driver takes well under a
# second, a live migration of a real guest minutes.
DURATION_BUCKETS: Final = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)


class OperationFigures(Collector):
    def __init__(self, plane: ControlPlane):
        self.plane = plane

    def collect(self) -> Iterable[Metric]:
        try:
            figures = list(self._figures())
        except sa.exc.DBAPIError as error:
            if not connection_lost(error):
                raise
            # The scrape still answers the requests counted (the 503s of the outage among them):
            # failing it whole would hide those from the dashboards and alerts exactly when they matter.
            LOG.warning("the journal's operations are left out of this scrape: %s", error.orig)
            return
        yield from figures

    def _figures(self) -> Iterable[Metric]:
        duration = operations.c.updated_at - operations.c.created_at
        ended = operations.c.state != RUNNING
        query = sa.select(
            operations.c.kind,
            operations.c.state,
            sa.func.count(),
            sa.func.sum(sa.case((ended, duration), else_=0.0)),
            *(sa.func.sum(sa.case((sa.and_(ended, duration <= bound), 1), else_=0)) for bound in DURATION_BUCKETS),
        ).group_by(operations.c.kind, operations.c.state)
        with self.plane.journal.engine.connect() as conn:
            rows = conn.execute(query).all()
        count = CounterMetricFamily(
            "berth_conductor_operations",
            "Operations that ended, by kind and state (done, failed, rolled_back).",
            labels=["kind", "state"],
        )
        durations = HistogramMetricFamily(
            "berth_conductor_operation_duration_seconds",
            "Time from the start of the operations that ended to their end, by kind and state.",
            labels=["kind", "state"],
        )
        running = GaugeMetricFamily("berth_conductor_operations_running", "Operations running now.", labels=["kind"])
        # Every kind has a sample, 0 when none of it runs: a gauge with no sample reads as unknown.
        now_running: Counter[str] = Counter({kind: 0 for kind in KINDS})
        for kind, state, n, total, *within in rows:
            if state == RUNNING:
                now_running[kind] += n
                continue
            count.add_metric([kind, state], n)
            buckets = [(f"{bound:g}", float(k or 0)) for bound, k in zip(DURATION_BUCKETS, within, strict=True)]
            durations.add_metric([kind, state], [*buckets, ("+Inf", float(n))], float(total or 0.0))
        for kind, n in sorted(now_running.items()):
            running.add_metric([kind], n)
        yield from (count, durations, running)
        yield from self._retries({kind for kind, *_ in rows})

    def _retries(self, kinds: set[str]) -> Iterable[Metric]:
        """The reschedules and take-overs of each kind (zero for every kind journaled)."""
        # The attempts and take-overs are inside the rows' JSON, counted here rather than in SQL
        # (SQLite and PostgreSQL read JSON arrays differently). Only the rows whose JSON, as text,
        # may hold one are read: most operations neither rescheduled nor were taken over, and a row
        # left out (no attempt, no take-over) adds nothing to either count.
        rescheduled_or_taken = sa.or_(
            sa.cast(operations.c.attempts, sa.Text) != "[]",
            sa.cast(operations.c.selections, sa.Text).contains(f'"{TAKEN_OVER}"'),
        )
        query = sa.select(operations.c.kind, operations.c.state, operations.c.attempts, operations.c.selections).where(
            rescheduled_or_taken
        )
        reschedules: Counter[str] = Counter()
        takeovers: Counter[str] = Counter()
        with self.plane.journal.engine.connect() as conn:
            for kind, state, attempts, selections in conn.execute(query):
                reschedules[kind] += rescheduled_hosts(attempts or [], state)
                takeovers[kind] += int((selections or {}).get(TAKEN_OVER, 0))
        rescheduled = CounterMetricFamily(
            "berth_conductor_reschedules",
            "Hosts that refused an operation's claim, the next one tried, by the operation's kind.",
            labels=["kind"],
        )
        taken = CounterMetricFamily(
            "berth_conductor_takeovers",
            "Operations a conductor took over from one that died, by the operation's kind.",
            labels=["kind"],
        )
        for kind in sorted(kinds | set(reschedules)):
            rescheduled.add_metric([kind], reschedules[kind])
            taken.add_metric([kind], takeovers[kind])
        yield from (rescheduled, taken)


def rescheduled_hosts(attempts: list[dict[str, object]], state: str) -> int:
    """The hosts of an operation's ``attempts`` (as the journal records them) after whose refusal
    another host was tried: a refusal followed by another host's attempt, or the last refusal of an
    operation that ended done (a host after it took the claim). The scheduler finding nothing
    (an attempt without a host) and a refusal after which no host was left count for nothing.
    An operation's count only grows while it runs, as a counter's must."""
    hosts = [bool(attempt.get("host")) for attempt in attempts]
    followed = sum(1 for here, after in zip(hosts, hosts[1:], strict=False) if here and after)
    return followed + int(bool(hosts) and hosts[-1] and state == DONE)
