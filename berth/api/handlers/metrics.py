"""GET /metrics: the service's metrics in Prometheus's text format (docs/operations.md)."""

from __future__ import annotations

from weakref import WeakKeyDictionary

from berth.api.call import Call
from berth.api.observability.cloud_figures import CloudFiguresCollector
from berth.store.database import Database
from berth.web.observability.exposition import Exposition
from berth.web.responses import Reply

# One per database the process serves (one, but for tests): its registry is built once.
_EXPOSITIONS: WeakKeyDictionary[Database, Exposition] = WeakKeyDictionary()


def metrics(call: Call) -> Reply:
    exposition = _EXPOSITIONS.get(call.db)
    if exposition is None:
        exposition = _EXPOSITIONS[call.db] = Exposition([CloudFiguresCollector(call.db)])
    body, content_type = exposition.render(call.request.headers.get("Accept"))
    return Reply(body, 200, content_type=content_type, headers={"cache-control": "no-cache"})
