"""What the conductors' API says of itself: version discovery (``GET /``), the probes (``/healthz``:
the process answers; ``/readyz``: its database and the service answer), the metrics (the request
metrics, and the journal's operations by kind and state, their time, reschedules and take-overs)."""

from __future__ import annotations

from collections.abc import Iterable
from importlib.metadata import version

import sqlalchemy as sa
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from berth.conductor.api import views
from berth.conductor.api.servers import plane_of
from berth.conductor.control.plane import ControlPlane
from berth.conductor.journal import RUNNING, operations
from berth.conductor.runner import TAKEN_OVER
from berth.domain.errors import Unavailable
from berth.web.app import WebCall
from berth.web.observability.exposition import Exposition
from berth.web.responses import Reply


def root(call: WebCall) -> Reply:
    return views.reply(
        {
            "name": "berth-conductor",
            "version": version("berth"),
            "links": [{"rel": "describedby", "href": "/berth/openapi.json"}],
        }
    )


def healthz(call: WebCall) -> Reply:
    return views.reply({"status": "ok"})


def readyz(call: WebCall) -> Reply:
    plane = plane_of(call)
    try:
        with plane.journal.engine.connect() as conn:
            conn.execute(sa.select(1))
    except sa.exc.DBAPIError as e:
        raise Unavailable(f"the conductors' database does not answer: {e.orig}") from None
    try:
        plane.placement.ping()
    except Exception as e:  # noqa: BLE001 - whatever the client raised, the service is not there
        raise Unavailable(f"the Placement service does not answer: {e}") from None
    return views.reply({"status": "ready"})


class OperationFigures(Collector):
    """The journal's operations, counted in the database at each scrape (so every conductor's
    count is the cloud's)."""

    def __init__(self, plane: ControlPlane):
        self.plane = plane

    def collect(self) -> Iterable[Metric]:
        query = sa.select(
            operations.c.kind,
            operations.c.state,
            sa.func.count(),
            sa.func.sum(operations.c.updated_at - operations.c.created_at),
        ).group_by(operations.c.kind, operations.c.state)
        with self.plane.journal.engine.connect() as conn:
            rows = conn.execute(query).all()
        count = CounterMetricFamily(
            "berth_conductor_operations", "Operations journaled, by kind and state.", labels=["kind", "state"]
        )
        seconds = CounterMetricFamily(
            "berth_conductor_operation_seconds",
            "Time from the start of the operations that ended to their end, by kind and state.",
            labels=["kind", "state"],
        )
        running = GaugeMetricFamily("berth_conductor_operations_running", "Operations running now.", labels=["kind"])
        for kind, state, n, total in rows:
            count.add_metric([kind, state], n)
            if state == RUNNING:
                running.add_metric([kind], n)
            else:
                seconds.add_metric([kind, state], float(total or 0.0))
        yield from (count, seconds, running)
        yield from self._retries()

    def _retries(self) -> Iterable[Metric]:
        query = sa.select(operations.c.attempts, operations.c.selections)
        reschedules = takeovers = 0
        with self.plane.journal.engine.connect() as conn:
            for attempts, selections in conn.execute(query):
                reschedules += len(attempts or ())
                takeovers += int((selections or {}).get(TAKEN_OVER, 0))
        yield CounterMetricFamily(
            "berth_conductor_reschedules", "Hosts that refused an operation's claim, the next one tried.", reschedules
        )
        yield CounterMetricFamily(
            "berth_conductor_takeovers", "Operations a conductor took over from one that died.", takeovers
        )


_EXPOSITIONS: dict[int, Exposition] = {}


def metrics(call: WebCall) -> Reply:
    plane = plane_of(call)
    exposition = _EXPOSITIONS.get(id(plane))
    if exposition is None:
        exposition = _EXPOSITIONS[id(plane)] = Exposition([OperationFigures(plane)])
    body, content_type = exposition.render(call.request.headers.get("Accept"))
    return Reply(body, 200, content_type=content_type, headers={"cache-control": "no-cache"})
