"""Paths to routes: Werkzeug's matching over a service's table of path rules, with the service's
404 and 405 answers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, Generic, TypeVar

from werkzeug.exceptions import NotFound as RouteNotFound
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request

from berth.domain.errors import BerthError

# What a service routes to: its own kind of route.
R = TypeVar("R")

# Where the matched route's rule is kept in the WSGI environment, for the request's metrics and log.
ROUTE_KEY: Final = "berth.route"


class RouteMap(Generic[R]):
    """Which path rule (Werkzeug's syntax, ``/servers/<uuid>``) of ``table`` serves a path, and its
    parameters; ``table`` maps each rule to the routes of its methods."""

    def __init__(self, table: Mapping[str, Mapping[str, R]]):
        self.table = table
        # Bound once: binding per request (host, scheme, script name) cost more than matching,
        # and none of it matters to which handler serves a path.
        self.adapter = Map(
            [Rule(rule, endpoint=rule) for rule in table],
            strict_slashes=False,
            merge_slashes=False,
        ).bind("placement")

    def match(self, path: str) -> tuple[str, Mapping[str, Any]]:
        """The rule serving ``path`` and the path's parameters; 404 when none does."""
        try:
            rule, params = self.adapter.match(path, return_rule=False)
        except RouteNotFound:
            raise no_route() from None
        return rule, params

    def route(self, request: Request) -> tuple[str, R, Mapping[str, Any]]:
        """The rule serving the request's path, its route for the request's method and the path's
        parameters; 404 when no rule serves the path, 405 when it has no route for the method. The
        rule is kept in the request's environment (``ROUTE_KEY``) for its metrics and log."""
        rule, params = self.match(request.path)
        request.environ[ROUTE_KEY] = rule
        methods = self.table[rule]
        route = methods.get(request.method)
        if route is None:
            raise method_not_allowed(methods)
        return rule, route, params

    def rule_of(self, path: str) -> str | None:
        """The rule of the route ``path`` belongs to, for a request refused before it was routed."""
        try:
            rule: str = self.adapter.match(path, return_rule=False)[0]
        except RouteNotFound:
            return None
        return rule


def no_route() -> BerthError:
    """The 404 of a path no route serves: the status's stock sentence alone, with no detail after it,
    as Placement's router answers it."""
    return BerthError("", status=404)


def method_not_allowed(allowed: Iterable[str]) -> BerthError:
    return BerthError(
        "The method specified is not allowed for this resource.",
        status=405,
        headers={"Allow": ", ".join(allowed)},
    )
