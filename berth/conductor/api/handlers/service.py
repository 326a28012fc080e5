"""What the conductors' API says of itself: version discovery (``GET /``), the probes (``/healthz``:
the process answers; ``/readyz``: its database and the service answer), the metrics (the request
metrics, and the journal's operations: operation_figures.py)."""

from __future__ import annotations

from importlib.metadata import version

import sqlalchemy as sa

from berth.conductor.api import views
from berth.conductor.api.handlers.servers import plane_of
from berth.conductor.api.operation_figures import OperationFigures
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


_EXPOSITIONS: dict[int, Exposition] = {}


def metrics(call: WebCall) -> Reply:
    plane = plane_of(call)
    exposition = _EXPOSITIONS.get(id(plane))
    if exposition is None:
        exposition = _EXPOSITIONS[id(plane)] = Exposition([OperationFigures(plane)])
    body, content_type = exposition.render(call.request.headers.get("Accept"))
    return Reply(body, 200, content_type=content_type, headers={"cache-control": "no-cache"})
