"""The conductors' WSGI application: the routes of the API over the web layer's ``JsonApp``, with
its authentication, policy, request ids, JSON errors and metrics; and the OpenAPI document built
from the same routes and the schemas that check the bodies."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib.metadata import version
from typing import TYPE_CHECKING, Any, Final

import sqlalchemy as sa

from berth.clients import request_ids
from berth.conductor.api import schemas, views
from berth.conductor.api.handlers import (
    actions,
    dashboard,
    flavors,
    hosts,
    operations,
    server_groups,
    servers,
    service,
)
from berth.conductor.api.policy import RULES
from berth.conductor.control.plane import ControlPlane
from berth.conductor.errors import DATABASE_UNAVAILABLE
from berth.conductor.journal import connection_lost
from berth.domain.errors import BerthError, Unavailable
from berth.domain.request_ids import global_request_id
from berth.web.access.auth import authenticator
from berth.web.access.keystone import keystone_wrapped
from berth.web.access.policy import PolicyEnforcer
from berth.web.app import JsonApp, WebCall, WebRoute, WebRouteTable
from berth.web.cors import with_cors
from berth.web.responses import Reply

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication

OPENAPI_PATH: Final = "/berth/openapi.json"
PUBLIC_PATHS: Final = frozenset({"/", "/healthz", "/readyz", OPENAPI_PATH})


def _database_unreachable(error: Exception) -> BerthError | None:
    """A connection to the conductors' database lost or not made (a restart, a failover) answers
    503 with a code, which a client may retry, rather than an unexpected error's 500. A change may
    have been made before the connection was lost: an operation's start is then in the journal."""
    if isinstance(error, sa.exc.DBAPIError) and connection_lost(error):
        return Unavailable(
            "The conductors' database cannot be reached (restarting or failing over); try the request again "
            "(an action's operation may have started: see GET /servers/{id}/operations).",
            code=DATABASE_UNAVAILABLE,
        )
    return None


def _routes(metrics: str) -> dict[str, dict[str, WebRoute]]:
    own = None  # the handler checks the rule against the object's project
    admin = "berth:hosts:manage"
    flavors_admin = "berth:flavors:manage"
    table = {
        "/": {"GET": WebRoute(service.root, None)},
        "/healthz": {"GET": WebRoute(service.healthz, None)},
        "/readyz": {"GET": WebRoute(service.readyz, None)},
        OPENAPI_PATH: {"GET": WebRoute(openapi, None)},
        "/servers": {
            "POST": WebRoute(servers.create, "berth:servers:create"),
            "GET": WebRoute(servers.index, own),
        },
        "/servers/detail": {"GET": WebRoute(servers.index, own)},
        "/servers/<server_id>": {
            "GET": WebRoute(servers.show, own),
            "DELETE": WebRoute(servers.delete, own),
        },
        "/servers/<server_id>/action": {"POST": WebRoute(actions.act, own)},
        "/servers/<server_id>/operations": {"GET": WebRoute(servers.operations, own)},
        "/flavors": {
            "POST": WebRoute(flavors.create, flavors_admin),
            "GET": WebRoute(flavors.index, "berth:flavors:index"),
        },
        "/flavors/detail": {"GET": WebRoute(flavors.index, "berth:flavors:index")},
        "/flavors/<flavor_id>": {
            "GET": WebRoute(flavors.show, "berth:flavors:index"),
            "DELETE": WebRoute(flavors.delete, flavors_admin),
        },
        "/flavors/<flavor_id>/os-extra_specs": {
            "GET": WebRoute(flavors.extra_specs, "berth:flavors:index"),
            "POST": WebRoute(flavors.set_extra_specs, flavors_admin),
        },
        "/flavors/<flavor_id>/os-extra_specs/<key>": {
            "GET": WebRoute(flavors.show_extra_spec, "berth:flavors:index"),
            "PUT": WebRoute(flavors.update_extra_spec, flavors_admin),
            "DELETE": WebRoute(flavors.unset_extra_spec, flavors_admin),
        },
        "/os-server-groups": {
            "POST": WebRoute(server_groups.create, "berth:server_groups:create"),
            "GET": WebRoute(server_groups.index, "berth:server_groups:index"),
        },
        "/os-server-groups/<group_id>": {
            "GET": WebRoute(server_groups.show, own),
            "DELETE": WebRoute(server_groups.delete, own),
        },
        "/hosts": {
            "GET": WebRoute(hosts.index, admin),
            "PUT": WebRoute(hosts.register_many, "berth:hosts:register"),
        },
        "/hosts/<name>": {
            "PUT": WebRoute(hosts.register, "berth:hosts:register"),
            "GET": WebRoute(hosts.show, admin),
            "DELETE": WebRoute(hosts.retire, "berth:hosts:retire"),
        },
        "/hosts/<name>/disable": {"POST": WebRoute(hosts.disable, admin)},
        "/hosts/<name>/enable": {"POST": WebRoute(hosts.enable, admin)},
        "/hosts/<name>/evacuate": {"POST": WebRoute(actions.evacuate_host, admin)},
        "/operations": {"GET": WebRoute(operations.index, "berth:operations:index")},
        "/berth/dashboard/control": {"GET": WebRoute(dashboard.control, admin)},
        "/operations/<operation_id>": {"GET": WebRoute(operations.show, own)},
    }
    if metrics != "off":
        table["/metrics"] = {"GET": WebRoute(service.metrics, "berth:metrics" if metrics == "guarded" else None)}
    return table


@dataclass(frozen=True)
class ApiSettings:
    # noauth2, tokens or keystone, as for ``berth serve``.
    auth_strategy: str = "noauth2"
    tokens_file: str | None = None
    policy_file: str | None = None
    enforce_new_defaults: bool = True
    # off, open or guarded (the rule berth:metrics).
    metrics: str = "guarded"
    # Origins whose pages may call the API (the service's dashboard); none: no CORS at all.
    cors_allowed_origins: tuple[str, ...] = ()


def _carrying(route: WebRoute) -> WebRoute:
    """The route with its handler's calls to the service and the agents (and the operation it
    starts, in its own thread) carrying the request's global id: the caller's well-formed
    ``X-Openstack-Request-Id``, else this request's own (``berth.clients.request_ids``)."""
    handler = route.handler

    @functools.wraps(handler)
    def carried(call: WebCall, /, **params: Any) -> Any:
        given = global_request_id(call.request.headers.get(request_ids.HEADER))
        with request_ids.carrying(given or call.request_id):
            return handler(call, **params)

    return WebRoute(carried, route.policy)


def create_app(plane: ControlPlane, settings: ApiSettings | None = None) -> WSGIApplication:
    settings = settings or ApiSettings()
    public = set(PUBLIC_PATHS) | ({"/metrics"} if settings.metrics == "open" else set())
    routes = {
        path: {m: _carrying(route) for m, route in methods.items()}
        for path, methods in _routes(settings.metrics).items()
    }
    api = JsonApp(
        routes,
        authenticate=authenticator(settings.auth_strategy, settings.tokens_file),
        policy=PolicyEnforcer(RULES, settings.policy_file, settings.enforce_new_defaults),
        public_paths=public,
        # GET /metrics is this API's own route (with the operations' figures), which JsonApp keeps;
        # it counts the requests (berth_http_...) as the service's does, unless the metrics are off.
        metrics=settings.metrics,
        service="conductor",
        context=plane,
        known_error=_database_unreachable,
    )
    app: WSGIApplication = api
    if settings.auth_strategy == "keystone":
        # The identity headers the keystone strategy trusts are set by auth_token, which removes a
        # caller's own: served without it, any caller could say it is the admin.
        app = keystone_wrapped(app, public)
    if settings.cors_allowed_origins:
        app = with_cors(app, settings.cors_allowed_origins)
    return app


_BODIES: Final[dict[tuple[str, str], Any]] = {
    ("POST", "/servers"): schemas.SERVER_CREATE,
    ("POST", "/servers/<server_id>/action"): schemas.SERVER_ACTION,
    ("POST", "/flavors"): schemas.FLAVOR_CREATE,
    ("POST", "/flavors/<flavor_id>/os-extra_specs"): schemas.EXTRA_SPECS,
    ("PUT", "/flavors/<flavor_id>/os-extra_specs/<key>"): schemas.EXTRA_SPEC_UPDATE,
    ("POST", "/os-server-groups"): schemas.SERVER_GROUP_CREATE,
    ("PUT", "/hosts/<name>"): schemas.HOST_REGISTER,
    ("PUT", "/hosts"): schemas.HOSTS_REGISTER,
    ("POST", "/hosts/<name>/disable"): schemas.HOST_DISABLE,
}
# Answered at once with the operation they started.
_ACCEPTED: Final = {("POST", "/servers"), ("DELETE", "/servers/<server_id>"), ("POST", "/servers/<server_id>/action")}


def openapi(call: WebCall) -> Reply:
    """The API's own description."""
    return views.reply(openapi_document())


def openapi_document(routes: WebRouteTable | None = None) -> dict[str, Any]:
    """OpenAPI 3.1 of every route, its rule and its body's schema."""
    paths: dict[str, Any] = {}
    for rule, methods in (routes or _routes("guarded")).items():
        path = rule.replace("<", "{").replace(">", "}")
        entry = paths.setdefault(path, {})
        for method, route in methods.items():
            operation: dict[str, Any] = {
                "summary": (route.handler.__doc__ or route.handler.__name__).strip().splitlines()[0],
                "responses": {"202" if (method, rule) in _ACCEPTED else "200": {"description": "success"}},
            }
            if route.policy:
                operation["x-policy"] = route.policy
            body = _BODIES.get((method, rule))
            if body is not None:
                operation["requestBody"] = {"content": {"application/json": {"schema": body}}}
            parameters = [p.strip("{}") for p in path.split("/") if p.startswith("{")]
            if parameters:
                operation["parameters"] = [
                    {"name": p, "in": "path", "required": True, "schema": {"type": "string"}} for p in parameters
                ]
            entry[method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "Berth conductors' API", "version": version("berth")},
        "paths": paths,
    }
