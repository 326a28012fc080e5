"""Cross-origin requests (oslo.middleware's CORS) in front of either HTTP service, so that a page
served from another origin (the service's dashboard reading the conductors' API) may call it with
a token. Preflight requests are answered by the middleware, before authentication."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication

# Headers a browser client needs to send and read, as Placement's CORS defaults.
CORS_DEFAULT_HEADERS: Final = [
    "X-Auth-Token",
    "X-Openstack-Request-Id",
    "X-Identity-Status",
    "X-Roles",
    "X-Service-Catalog",
    "X-User-Id",
    "X-Tenant-Id",
    "OpenStack-API-Version",
]
CORS_METHODS: Final = ["GET", "PUT", "POST", "DELETE", "PATCH"]


def with_cors(app: WSGIApplication, origins: Sequence[str], extra_headers: Sequence[str] = ()) -> WSGIApplication:
    """``app`` answering cross-origin requests from ``origins`` alone."""
    from oslo_middleware import cors

    wrapped = cors.CORS(app, {})
    wrapped.add_origin(
        list(origins),
        allow_headers=CORS_DEFAULT_HEADERS + list(extra_headers),
        expose_headers=CORS_DEFAULT_HEADERS,
        allow_methods=CORS_METHODS,
    )
    result: WSGIApplication = wrapped
    return result
