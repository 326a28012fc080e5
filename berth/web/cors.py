"""Cross-origin requests (oslo.middleware's CORS) in front of either HTTP service, so that a page
served from another origin (the service's dashboard reading the conductors' API) may call it with
a token. Preflight requests are answered by the middleware, before authentication."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

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
# Set in the environment of every request the middleware passes on: it answers any ``OPTIONS``
# the application refused (a preflight, which carries no token) with 200, and the request's
# metrics and log line record that answer, not the refusal it replaced.
CORS_KEY: Final = "berth.cors"


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

    def marked(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        environ[CORS_KEY] = True
        answer: Iterable[bytes] = wrapped(environ, start_response)
        return answer

    return marked
