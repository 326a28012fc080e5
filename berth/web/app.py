"""A JSON API without microversions, as a WSGI application: what a service beside the Placement API
(the conductors' API) is built from.

Each request passes, in this order: its request id, authentication (unless its path is public), the
refusal of NUL characters, of a body without Content-Type and of one over the limit, routing (404,
405 with ``Allow``), the route's policy rule, then the handler. Every error is Placement's JSON
error body with a ``code``.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.wrappers import Request

from berth.domain import error_codes
from berth.domain.errors import BadRequest, BerthError
from berth.web import errors
from berth.web.access.auth import Authenticator, Caller
from berth.web.access.policy import PolicyEnforcer
from berth.web.json_body import read_json
from berth.web.observability.exposition import Exposition
from berth.web.observability.request_observer import RequestObserver
from berth.web.request_checks import (
    MAX_BODY_BYTES,
    refuse_nul_characters,
    refuse_undecodable_query,
    require_content_type,
)
from berth.web.responses import Reply
from berth.web.routing import RouteMap

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

LOG = logging.getLogger(__name__)
METRICS_PATH: Final = "/metrics"
# GET /metrics: not served, served to any caller, or to authenticated callers (and the metrics rule).
METRICS_MODES: Final = ("off", "open", "guarded")


@dataclass
class WebCall:
    """What a handler is given: the request, who sent it, and the service's own ``context``."""

    request: Request
    request_id: str
    caller: Caller | None
    context: Any
    policy: PolicyEnforcer

    def json_body(self) -> dict[str, Any]:
        """The request's body, which must be a JSON object."""
        data = read_json(self.request)
        if not isinstance(data, dict):
            raise BadRequest(f"The request body must be a JSON object, not {_json_kind(data)}.")
        return data

    def authorize(self, rule: str, target: Mapping[str, object] | None = None) -> None:
        self.policy.authorize(self.caller, rule, target)


# A handler takes the call and the path's parameters by name.
WebHandler: TypeAlias = Callable[..., Reply]


@dataclass(frozen=True)
class WebRoute:
    handler: WebHandler
    # The rule checked before the handler runs; None: the handler authorizes for itself, if at all.
    policy: str | None


# Path (Werkzeug's rule syntax) -> HTTP method -> route.
WebRouteTable: TypeAlias = Mapping[str, Mapping[str, WebRoute]]


class JsonApp:
    """The WSGI application over ``routes``: ``authenticate`` names the caller of every path but
    ``public_paths``, ``policy`` holds the routes' rules, and ``context`` is handed to every handler
    (the service's own parts). ``metrics`` says whether requests are counted and ``GET /metrics``
    served: ``off``, ``open`` (to anyone), or ``guarded`` (to a caller ``metrics_policy`` grants, or
    any authenticated one without it); ``service`` names the service in the request log;
    ``known_error`` turns an exception a handler raised into the error it answers (None: a 500)."""

    def __init__(
        self,
        routes: WebRouteTable,
        *,
        authenticate: Authenticator,
        policy: PolicyEnforcer,
        public_paths: Iterable[str] = (),
        metrics: str = "guarded",
        metrics_policy: str | None = None,
        service: str,
        context: Any = None,
        known_error: Callable[[Exception], BerthError | None] | None = None,
    ):
        if metrics not in METRICS_MODES:
            raise ValueError(f"unknown metrics mode {metrics!r}")
        self.route_table: dict[str, Mapping[str, WebRoute]] = dict(routes)
        self.public_paths = frozenset(public_paths)
        # A service that serves GET /metrics itself (the conductors', with their operations' figures)
        # keeps its own route; the requests are counted either way.
        if METRICS_PATH in routes:
            pass
        elif metrics == "open":
            self.route_table[METRICS_PATH] = {"GET": WebRoute(self._metrics, None)}
            self.public_paths |= {METRICS_PATH}
        elif metrics == "guarded":
            self.route_table[METRICS_PATH] = {"GET": WebRoute(self._metrics, metrics_policy)}
        self.authenticate = authenticate
        self.policy = policy
        self.context = context
        self.known_error = known_error
        self.routes = RouteMap(self.route_table)
        self.observer = RequestObserver(self.route_table, metrics=metrics != "off", service=service)
        self._exposition: Exposition | None = None

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        started = time.perf_counter()
        request = Request(environ)
        request.max_content_length = MAX_BODY_BYTES
        request_id = f"req-{uuid.uuid4()}"
        caller = None
        code = reason = None
        try:
            if request.path not in self.public_paths:
                caller = self.authenticate(request.headers)
            refuse_nul_characters(request)
            refuse_undecodable_query(request)
            require_content_type(request)
            if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
                raise RequestEntityTooLarge()
            response = self._dispatch_known(request, request_id, caller)
        except BerthError as error:
            code = error_codes.BERTH_UNDEFINED if error.code == error_codes.UNDEFINED else error.code
            reason = error.reason
            response = _error(request, error.status, error.detail, code, request_id, error.headers)
        except RequestEntityTooLarge:
            response = _error(request, 413, "The request body is too large.", error_codes.BERTH_UNDEFINED, request_id)
        except Exception:  # noqa: BLE001 - the last line of defence must catch everything
            LOG.exception("unexpected error serving %s %s", request.method, request.path)
            response = _error(request, 500, "An unexpected error occurred.", error_codes.BERTH_UNDEFINED, request_id)
        response.headers["x-openstack-request-id"] = request_id
        self.observer.observe_request(request, self.routes, response.status, started, request_id, caller, code, reason)
        return response(environ, start_response)

    def _dispatch_known(self, request: Request, request_id: str, caller: Caller | None) -> Reply:
        try:
            return self._dispatch(request, request_id, caller)
        except BerthError:
            raise
        except Exception as error:
            known = self.known_error(error) if self.known_error is not None else None
            if known is None:
                raise
            raise known from error

    def _dispatch(self, request: Request, request_id: str, caller: Caller | None) -> Reply:
        _, route, params = self.routes.route(request)
        call = WebCall(request=request, request_id=request_id, caller=caller, context=self.context, policy=self.policy)
        if route.policy:
            call.authorize(route.policy)
        reply: Reply = route.handler(call, **params)
        return reply

    def _metrics(self, call: WebCall) -> Reply:
        if self._exposition is None:
            self._exposition = Exposition()
        body, content_type = self._exposition.render(call.request.headers.get("Accept"))
        return Reply(body, 200, content_type=content_type, headers={"cache-control": "no-cache"})


def _error(
    request: Request, status: int, detail: str, code: str, request_id: str, headers: Mapping[str, str] | None = None
) -> Reply:
    body = errors.error_body(
        status, detail, code=code, request_id=request_id, include_code=True, environ=request.environ
    )
    return Reply(body, status, headers=headers)


def _json_kind(data: object) -> str:
    if isinstance(data, list):
        return "an array"
    if isinstance(data, str):
        return "a string"
    if data is None:
        return "null"
    return "a boolean" if isinstance(data, bool) else "a number"
