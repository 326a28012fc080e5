"""Paths to routes: Werkzeug's matching over a service's table of path rules, with the service's
404 and 405 answers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from werkzeug.exceptions import NotFound as RouteNotFound
from werkzeug.routing import Map, Rule

from berth.domain.errors import BerthError

# Where the matched route's rule is kept in the WSGI environment, for the request's metrics and log.
ROUTE_KEY: Final = "berth.route"


class RouteMap:
    """Which path rule (Werkzeug's syntax, ``/servers/<uuid>``) serves a path, and its parameters."""

    def __init__(self, rules: Iterable[str]):
        # Bound once: binding per request (host, scheme, script name) cost more than matching,
        # and none of it matters to which handler serves a path.
        self.adapter = Map(
            [Rule(rule, endpoint=rule) for rule in rules],
            strict_slashes=False,
            merge_slashes=False,
        ).bind("placement")

    def match(self, path: str) -> tuple[str, Mapping[str, Any]]:
        """The rule serving ``path`` and the path's parameters; 404 when none does."""
        try:
            rule, params = self.adapter.match(path, return_rule=False)
        except RouteNotFound:
            raise BerthError("The resource could not be found.", status=404) from None
        return rule, params

    def rule_of(self, path: str) -> str | None:
        """The rule of the route ``path`` belongs to, for a request refused before it was routed."""
        try:
            rule: str = self.adapter.match(path, return_rule=False)[0]
        except RouteNotFound:
            return None
        return rule


def method_not_allowed(allowed: Iterable[str]) -> BerthError:
    return BerthError(
        "The method specified is not allowed for this resource.",
        status=405,
        headers={"Allow": ", ".join(allowed)},
    )
