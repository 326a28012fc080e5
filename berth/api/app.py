"""The WSGI application: request ids, authentication, microversions, routing and error rendering.

Kept as one small function over Werkzeug's request and routing objects so that the order of checks is
visible in one place and matches the reference's middleware order: request id, then authentication
(``GET /`` is exempt), then microversion negotiation, then routing, policy and the handler.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from werkzeug.exceptions import NotFound as RouteNotFound
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request

from berth.api import auth, errors, microversion
from berth.api.policy import PolicyEnforcer
from berth.api.responses import JSON, Reply
from berth.api.routes import ROUTES
from berth.api.validation import parse_json_body
from berth.domain.errors import BerthError
from berth.store.candidates import DEFAULT_CACHE_CAPACITY, ProviderCache
from berth.store.database import Database

LOG = logging.getLogger(__name__)
MAX_BODY_BYTES = 8 * 1024 * 1024
# Paths any caller may read: version discovery, as in Placement, and the API's own description.
PUBLIC_PATHS = frozenset(["/", "/berth/openapi.json"])


@dataclass(frozen=True)
class Settings:
    """Operator settings of the API."""

    # Upper bound of allocation candidates generated for one request, whatever its limit.
    max_candidates: int = 1000
    # Visit trees from a random starting point and shuffle the answer, instead of provider order.
    randomize_candidates: bool = False
    # noauth2, tokens or keystone; see berth.api.auth.
    auth_strategy: str = "noauth2"
    tokens_file: str | None = None
    # oslo.policy rules overriding the defaults, and which defaults: legacy or secure RBAC.
    policy_file: str | None = None
    enforce_new_defaults: bool = False
    # Providers whose candidate data each worker keeps between requests (0: none).
    provider_cache_size: int = DEFAULT_CACHE_CAPACITY
    cors_allowed_origins: tuple[str, ...] = ()
    cors_allow_headers: tuple[str, ...] = ()


@dataclass
class Call:
    """Everything a handler needs to know about the request it serves."""

    request: Request
    version: microversion.Version
    request_id: str
    caller: auth.Caller | None
    db: Database
    policy: PolicyEnforcer
    params: dict
    settings: Settings
    provider_cache: ProviderCache

    @property
    def args(self):
        return self.request.args

    def authorize(self, rule: str, target: dict | None = None) -> None:
        self.policy.authorize(self.caller, rule, target)

    def json_body(self, schema=None):
        return parse_json_body(self, schema)


class PlacementApp:
    def __init__(self, db: Database, settings: Settings | None = None):
        self.db = db
        self.settings = settings = settings or Settings()
        self.authenticate = auth.authenticator(settings.auth_strategy, settings.tokens_file)
        self.policy = PolicyEnforcer(settings.policy_file, settings.enforce_new_defaults)
        self.provider_cache = ProviderCache(settings.provider_cache_size)
        # Bound once: binding per request (host, scheme, script name) cost more than matching,
        # and none of it matters to which handler serves a path.
        self.routes = Map(
            [Rule(path, endpoint=path) for path in ROUTES],
            strict_slashes=False,
            merge_slashes=False,
        ).bind("placement")

    def __call__(self, environ, start_response):
        request = Request(environ)
        request.max_content_length = MAX_BODY_BYTES
        request_id = f"req-{uuid.uuid4()}"
        version = microversion.MIN
        version_known = False
        try:
            caller = None
            if request.path not in PUBLIC_PATHS:
                caller = self.authenticate(request.headers)
            version = microversion.parse(request.headers.get(microversion.HEADER))
            version_known = True
            _refuse_nul_characters(request)
            if request.content_length and not request.headers.get("Content-Type"):
                raise BerthError("content-type header required when content-length > 0", status=400)
            response = self._dispatch(request, version, request_id, caller)
        except BerthError as error:
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
            response = self._error(413, "The request body is too large.", None, request_id, version, version_known)
        except Exception:  # noqa: BLE001 - the last line of defence must catch everything
            LOG.exception("unexpected error serving %s %s", request.method, request.path)
            response = self._error(500, "An unexpected error occurred.", None, request_id, version, version_known)
        response.headers["x-openstack-request-id"] = request_id
        if version_known:
            response.headers[microversion.HEADER] = f"{microversion.SERVICE_TYPE} {version}"
            response.headers["vary"] = microversion.HEADER.lower()
        return response(environ, start_response)

    def _dispatch(self, request, version, request_id, caller):
        try:
            path, params = self.routes.match(request.path, return_rule=False)
        except RouteNotFound:
            raise BerthError("The resource could not be found.", status=404) from None
        methods = ROUTES[path]
        route = methods.get(request.method)
        if route is None:
            raise BerthError(
                "The method specified is not allowed for this resource.",
                status=405,
                headers={"Allow": ", ".join(methods)},
            )
        if version < route.min_version:
            if route.too_old_status == 405:
                allowed = [m for m, r in methods.items() if version >= r.min_version]
                raise BerthError(
                    "The method specified is not allowed for this resource.",
                    status=405,
                    headers={"Allow": ", ".join(allowed)},
                )
            raise BerthError("The resource could not be found.", status=404)
        call = Call(
            request=request,
            version=version,
            request_id=request_id,
            caller=caller,
            db=self.db,
            policy=self.policy,
            params=params,
            settings=self.settings,
            provider_cache=self.provider_cache,
        )
        if route.policy:
            call.authorize(route.policy)
        if request.method == "GET":
            _check_accept(request)
        return route.handler(call, **params)

    def _error(self, status, detail, code, request_id, version, version_known, headers=None, request=None):
        method = request.method if request is not None else None
        extra = None
        if status == 406 and not version_known:
            extra = {"max_version": str(microversion.MAX), "min_version": str(microversion.MIN)}
        body = errors.error_body(
            status,
            detail,
            code=code,
            request_id=request_id,
            include_code=version_known and version.at_least(23),
            extra=extra,
            explanation=f"The method {method} is not allowed for this resource." if status == 405 else None,
        )
        response = Reply(body if isinstance(body, bytes) else body.encode(), status, headers=headers)
        if (
            request is not None
            and request.headers.get("Accept")
            and request.accept_mimetypes.best_match([JSON, "text/html"]) == "text/html"
        ):
            # A browser asking for HTML gets the same error as a page, as from the reference.
            response = Reply(
                errors.html_body(status, detail).encode(), status, content_type="text/html", headers=headers
            )
        return response


def _refuse_nul_characters(request: Request) -> None:
    """No identifier or name may hold a NUL: PostgreSQL cannot store one, and no client needs it."""
    if (
        "\x00" in request.path
        or "%00" in request.query_string.decode("latin-1")
        or "\x00" in request.query_string.decode("latin-1")
    ):
        raise BerthError("NUL characters are not allowed in the request.", status=400)


def _check_accept(request: Request) -> None:
    accept = request.headers.get("Accept")
    if (
        accept
        and accept.strip()
        and not request.accept_mimetypes.accept_json
        and request.accept_mimetypes.best_match([JSON]) is None
    ):
        raise BerthError("Only application/json is provided", status=406)
