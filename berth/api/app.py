"""The WSGI application: request ids, authentication, microversions, routing and error rendering.

Kept as one small function over Werkzeug's request and routing objects so that the order of checks is
visible in one place and matches the reference's middleware order: request id, then authentication
(``GET /`` is exempt), then microversion negotiation, then routing, the route's microversion, the
media types (``Accept``, ``Content-Type``; a handler's decorators in the reference), policy and the
handler.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final

from werkzeug.exceptions import RequestEntityTooLarge

from berth.api import microversion
from berth.api.call import Call
from berth.api.dashboard import PUBLIC_PATHS as DASHBOARD_PUBLIC_PATHS
from berth.api.microversion import ERROR_CODES, Version
from berth.api.observability.database_metrics import observe_database
from berth.api.observability.placement_observer import PlacementRequestObserver
from berth.api.policy import placement_policy
from berth.api.request import PlacementRequest
from berth.api.routing.route import Route
from berth.api.routing.routes import METRICS_PATH, PROBE_PATHS, served_routes
from berth.api.settings import Settings as Settings  # where the service's callers have always found it
from berth.domain import error_codes
from berth.domain.errors import BerthError
from berth.store.candidates.provider_cache import ProviderCache
from berth.store.database import Database
from berth.store.pick.board.host_board import HostBoard
from berth.web import errors
from berth.web.access import auth
from berth.web.json_body import require_json
from berth.web.request_checks import (
    MAX_BODY_BYTES,
    refuse_nul_characters,
    refuse_undecodable_query,
    require_content_type,
)
from berth.web.responses import JSON, Reply
from berth.web.routing import RouteMap, method_not_allowed, no_route

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

LOG = logging.getLogger(__name__)
# Paths any caller may read: version discovery, as in Placement, and the API's own description.
PUBLIC_PATHS = frozenset(["/", "/berth/openapi.json"]) | DASHBOARD_PUBLIC_PATHS
# Berth's own API, beside Placement's: its errors always carry a code, and never a ``placement.*`` one
# for want of a finer one (``berth.undefined_code`` instead), whatever microversion was asked.
BERTHS_OWN_PREFIX: Final = "/berth/"
# The first segments of Placement's paths. None of its paths but "/" ends in a slash or starts with
# two, and Placement answers 404 for one that does ("/traits/", "//traits"), where the route map
# (lenient about a final slash, for the dashboard's "/dashboard/") and Werkzeug's ``path`` (which
# drops extra leading slashes) would serve the path without them.
_PLACEMENT_NOUNS: Final = frozenset(
    {
        "",
        "resource_providers",
        "resource_classes",
        "traits",
        "allocations",
        "allocation_candidates",
        "usages",
        "reshaper",
    }
)


class PlacementApp:
    def __init__(self, db: Database, settings: Settings | None = None):
        self.db = db
        self.settings = settings = settings or Settings()
        self.authenticate = auth.authenticator(settings.auth_strategy, settings.tokens_file)
        self.policy = placement_policy(settings.policy_file, settings.enforce_new_defaults)
        self.provider_cache = ProviderCache(settings.provider_cache_size)
        self.host_board = HostBoard(enabled=settings.pick_board)
        self.route_table = served_routes(settings.metrics)
        self.public_paths = PUBLIC_PATHS | PROBE_PATHS
        if settings.metrics == "open":
            self.public_paths |= {METRICS_PATH}
        self.observer = PlacementRequestObserver(self.route_table, metrics=settings.metrics != "off")
        if settings.metrics != "off":
            observe_database(db)
        self.routes = RouteMap(self.route_table)

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        started = time.perf_counter()
        request = PlacementRequest(environ)
        request.max_content_length = MAX_BODY_BYTES
        request_id = f"req-{uuid.uuid4()}"
        version = microversion.MIN
        version_known = False
        caller = None
        error_code = error_reason = None
        try:
            if request.path not in self.public_paths:
                caller = self.authenticate(request.headers)
            version = microversion.parse(request.headers.get(microversion.HEADER))
            version_known = True
            refuse_nul_characters(request)
            refuse_undecodable_query(request)
            require_content_type(request)
            response = self._dispatch(request, version, request_id, caller)
        except BerthError as error:
            error_code, error_reason = _answered_code(error.code, request.path), error.reason
            response = self._error(
                error.status,
                error.detail,
                error.code,
                request_id,
                version,
                version_known,
                error.headers,
                request=request,
            )
        except RequestEntityTooLarge:
            response = self._error(
                413, "The request body is too large.", None, request_id, version, version_known, request=request
            )
        except Exception:  # noqa: BLE001 - the last line of defence must catch everything
            LOG.exception("unexpected error serving %s %s", request.method, request.path)
            response = self._error(
                500, "An unexpected error occurred.", None, request_id, version, version_known, request=request
            )
        response.headers["x-openstack-request-id"] = request_id
        if version_known:
            response.headers[microversion.HEADER] = f"{microversion.SERVICE_TYPE} {version}"
            response.headers["vary"] = microversion.HEADER.lower()
        self.observer.observe_request(
            request, self.routes, response.status, started, request_id, caller, error_code, error_reason
        )
        return response(environ, start_response)

    def _dispatch(
        self, request: PlacementRequest, version: Version, request_id: str, caller: auth.Caller | None
    ) -> Reply:
        path_info = request.environ.get("PATH_INFO", "")
        if (
            path_info != "/"
            and (path_info.endswith("/") or path_info.startswith("//"))
            and request.path.split("/")[1] in _PLACEMENT_NOUNS
        ):
            raise no_route()
        path, route, params = self.routes.route(request)
        methods = self.route_table[path]
        if path in _MEDIA_TYPES_BEFORE_MICROVERSION:
            _check_media_types(request, path, route, version)
        if version < route.min_version:
            if route.too_old_status == 405:
                raise method_not_allowed(m for m, r in methods.items() if version >= r.min_version)
            raise no_route()
        call = Call(
            request=request,
            version=version,
            request_id=request_id,
            caller=caller,
            db=self.db,
            policy=self.policy,
            settings=self.settings,
            provider_cache=self.provider_cache,
            host_board=self.host_board,
        )
        if path not in _MEDIA_TYPES_BEFORE_MICROVERSION:
            _check_media_types(request, path, route, version)
        if route.policy:
            call.authorize(route.policy)
        reply: Reply = route.handler(call, **params)
        return reply

    def _error(
        self,
        status: int,
        detail: str,
        code: str | None,
        request_id: str,
        version: Version,
        version_known: bool,
        headers: Mapping[str, str] | None = None,
        request: PlacementRequest | None = None,
    ) -> Reply:
        own = request is not None and _berths_own(request.path)
        if own:
            code = _answered_code(code, BERTHS_OWN_PREFIX)
        extra = None
        if status == 406 and not version_known:
            extra = {"max_version": str(microversion.MAX), "min_version": str(microversion.MIN)}
        environ = request.environ if request is not None else {}
        if status == 401 and not own:
            # Placement's authentication middleware answers outside the microversion middleware that
            # formats its other errors: WebOb's own error, without the reason, in each form.
            detail = ""
            body = errors.webob_json_body(status, environ)
        else:
            body = errors.error_body(
                status,
                detail,
                code=code,
                request_id=request_id,
                include_code=own or (version_known and version >= ERROR_CODES),
                environ=environ,
                extra=extra,
            )
        response = Reply(body, status, headers=headers)
        if request is not None and request.headers.get("Accept", "").strip() not in _PLAIN_ACCEPTS:
            # A client that takes HTML, or neither HTML nor JSON, gets the same error as a page or as
            # plain text, as from the reference.
            taken = errors.error_media_type(request.accept_mimetypes)
            if taken == "text/html":
                page = errors.html_body(status, detail, environ)
                response = Reply(page.encode(), status, content_type="text/html; charset=UTF-8", headers=headers)
            elif taken is None:
                text = errors.plain_body(status, detail, environ)
                response = Reply(text.encode(), status, content_type="text/plain; charset=UTF-8", headers=headers)
        return response


def _berths_own(path: str) -> bool:
    return path.startswith(BERTHS_OWN_PREFIX)


def _answered_code(code: str | None, path: str) -> str | None:
    """The code an error answers with: on Berth's own paths, ``berth.undefined_code`` where it has
    no finer one."""
    if _berths_own(path) and code in (None, error_codes.UNDEFINED):
        return error_codes.BERTH_UNDEFINED
    return code


# The GET routes that answer whatever the Accept header asks: version discovery and a trait's
# existence (a 204), which Placement serves without its Accept check, and /metrics, which
# negotiates its own formats.
_ANY_ACCEPT: Final = frozenset({"/", "/traits/<name>", METRICS_PATH})

# What nearly every client sends: answered without parsing the header.
_PLAIN_ACCEPTS: Final = frozenset({"", JSON, "*/*"})

# The paths whose handlers in the reference check the media types before the microversion (its
# ``check_accept`` and ``require_content`` decorators outside ``version_handler``): a 406 or 415
# rather than the 404 of a microversion older than the route.
_MEDIA_TYPES_BEFORE_MICROVERSION: Final = frozenset({"/resource_providers/<uuid>/aggregates"})


def _check_media_types(request: PlacementRequest, path: str, route: Route, version: Version) -> None:
    """What the client takes and sends, checked before the policy as the reference's handlers check
    them: a client that could not use the answer, or whose body cannot be read, hears so first."""
    if request.method == "GET" and path not in _ANY_ACCEPT:
        _check_accept(request)
    if route.json_body_until is not None and version <= route.json_body_until:
        require_json(request)


def _check_accept(request: PlacementRequest) -> None:
    accept = request.headers.get("Accept")
    if accept is None or accept.strip() in _PLAIN_ACCEPTS:
        return
    # JSON acceptable at a quality above 0, as the reference decides (webob's acceptable offers):
    # "application/json;q=0" refuses JSON, though werkzeug's ``accept_json`` says yes to it.
    if request.accept_mimetypes.best_match([JSON]) is None:
        raise BerthError("Only application/json is provided", status=406)
