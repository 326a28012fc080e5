"""GET /healthz and GET /readyz: the probes of load balancers and orchestrators, open to any caller.

``/healthz`` says the process answers; ``/readyz`` also that the database answers and its schema is
the one this code needs, so that a new server is sent no traffic before ``berth db upgrade`` ran.
"""

from __future__ import annotations

from berth.api.call import Call
from berth.api.responses import json_response
from berth.domain.errors import Unavailable
from berth.store.observability.readiness import unready_reason
from berth.web.responses import Reply


def healthz(call: Call) -> Reply:
    return json_response(call, {"status": "ok"})


def readyz(call: Call) -> Reply:
    reason = unready_reason(call.db)
    if reason is not None:
        raise Unavailable(reason)
    return json_response(call, {"status": "ready"})
