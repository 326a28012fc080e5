"""A route: what serves one method of one path, from which microversion, under which rule."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeAlias

from berth.api.microversion import Version
from berth.web.responses import Reply

# A handler takes the call and the path's parameters by name.
Handler: TypeAlias = Callable[..., Reply]


@dataclass(frozen=True)
class Route:
    handler: Handler
    min_version: Version
    policy: str | None
    # What a request older than min_version gets: the reference answers 404 for most routes and
    # 405 for a few methods added to an existing path.
    too_old_status: int = 404
    # The last microversion at which the method takes a JSON body (None: it takes none): the
    # reference refuses another media type before the policy is asked (its ``require_content``).
    json_body_until: Version | None = None


# Path (Werkzeug's rule syntax) -> HTTP method -> route.
RouteTable: TypeAlias = Mapping[str, Mapping[str, Route]]
