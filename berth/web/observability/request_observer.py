"""What the application records of each request: its metrics and its log line.

Label children are kept in dictionaries of this module: looking one up through ``labels()`` takes a
lock and checks its arguments on every call, several microseconds per request for nothing.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from typing import Any, Final

from prometheus_client.metrics import Counter, Histogram
from werkzeug.wrappers import Request

from berth.domain.request_ids import global_request_id
from berth.web.access.auth import Caller
from berth.web.cors import CORS_KEY
from berth.web.observability.metrics import HTTP_REQUEST_DURATION, HTTP_REQUESTS
from berth.web.observability.request_log import RequestLine, log_request
from berth.web.routing import ROUTE_KEY, RouteMap

# The route label of a path no route matches: raw paths would make a series per provider.
UNMATCHED: Final = "unmatched"
# Methods any route serves; any other (a client's own token) is counted as "other".
_METHODS: Final = frozenset(["GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"])
_PARAMETER: Final = re.compile(r"<(?:[a-z]+:)?([a-z_]+)>")


def route_template(rule: str) -> str:
    """A Werkzeug rule (``/resource_providers/<uuid>``) as the API's documents write it, ``{uuid}``."""
    return _PARAMETER.sub(r"{\1}", rule)


class RequestObserver:
    """Counts, times and logs each request; ``metrics`` off leaves only the log line, which names
    ``service`` when one is given (the Placement service's lines name none, as they always have)."""

    def __init__(self, rules: Iterable[str], *, metrics: bool, service: str | None = None):
        self.metrics = metrics
        self.service = service
        self.templates = {rule: route_template(rule) for rule in rules}
        self._requests: dict[tuple[str, str, int], Counter] = {}
        self._durations: dict[tuple[str, str], Histogram] = {}

    def observe(
        self,
        *,
        rule: str | None,
        method: str,
        status: int,
        seconds: float,
        request_id: str,
        global_request_id: str | None,
        project: str | None,
        error_code: str | None,
        error_reason: str | None = None,
    ) -> None:
        route = self.templates.get(rule, UNMATCHED) if rule is not None else UNMATCHED
        if method not in _METHODS:
            method = "other"
        if self.metrics:
            self._count(route, method, status, seconds, error_code, error_reason)
        log_request(
            RequestLine(
                request_id=request_id,
                global_request_id=global_request_id,
                route=route,
                method=method,
                status=status,
                latency_ms=round(seconds * 1000.0, 3),
                project=project,
                error_code=error_code,
                service=self.service,
            )
        )

    def observe_request(
        self,
        request: Request,
        routes: RouteMap[Any],
        status: int,
        started: float,
        request_id: str,
        caller: Caller | None,
        error_code: str | None,
        error_reason: str | None,
    ) -> None:
        """:meth:`observe` for a request answered at ``time.perf_counter()``, from ``started``: its
        route is the one it was dispatched to, or for a request refused before, its path's; its
        status is the one sent, which for an ``OPTIONS`` behind the CORS middleware is 200 when the
        application refused it (a preflight carries no token)."""
        environ = request.environ
        if environ.get(CORS_KEY) and request.method == "OPTIONS" and not 200 <= status < 300:
            status, error_code, error_reason = 200, None, None
        self.observe(
            rule=environ.get(ROUTE_KEY) or routes.rule_of(request.path),
            method=request.method,
            status=status,
            seconds=time.perf_counter() - started,
            request_id=request_id,
            global_request_id=global_request_id(environ.get("HTTP_X_OPENSTACK_REQUEST_ID")),
            project=caller.project_id if caller is not None else None,
            error_code=error_code,
            error_reason=error_reason,
        )

    def _count(
        self, route: str, method: str, status: int, seconds: float, error_code: str | None, error_reason: str | None
    ) -> None:
        key = (route, method, status)
        requests = self._requests.get(key)
        if requests is None:
            requests = self._requests[key] = HTTP_REQUESTS.labels(route, method, str(status))
        requests.inc()
        duration = self._durations.get(key[:2])
        if duration is None:
            duration = self._durations[key[:2]] = HTTP_REQUEST_DURATION.labels(route, method)
        duration.observe(seconds)
