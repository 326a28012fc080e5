"""The public half: the page, its assets, and what the page must know before it may ask anything."""

from __future__ import annotations

from berth.api.call import Call
from berth.api.dashboard import assets
from berth.api.responses import json_response, link
from berth.web.responses import Reply
from berth.web.routing import no_route

REFRESH_SECONDS = 5
PAGE_SIZE = 20
# The development mode's administrator token: under noauth2 the page opens without asking for one.
NOAUTH_ADMIN_TOKEN = "admin"
_NO_CACHE = {"cache-control": "no-cache"}


def dashboard_page(call: Call) -> Reply:
    return Reply(
        assets.page(link(call, "")),
        content_type=assets.assets()[assets.PAGE].content_type,
        headers={**_NO_CACHE, "x-content-type-options": "nosniff"},
    )


def dashboard_asset(call: Call, name: str) -> Reply:
    asset = assets.assets().get(name)
    if asset is None or name == assets.PAGE:
        raise no_route()
    return Reply(
        asset.body, content_type=asset.content_type, headers={**_NO_CACHE, "x-content-type-options": "nosniff"}
    )


def dashboard_config(call: Call) -> Reply:
    """How the page authenticates and how often it refreshes; no secret: the development token is
    the one every noauth2 client already knows."""
    strategy = call.settings.auth_strategy
    return json_response(
        call,
        {
            "auth_strategy": strategy,
            "token_required": strategy != "noauth2",
            "development_token": NOAUTH_ADMIN_TOKEN if strategy == "noauth2" else None,
            "refresh_seconds": REFRESH_SECONDS,
            "page_size": PAGE_SIZE,
            # Where the page reads the control plane (GET /berth/dashboard/control) with its token.
            "conductor_url": _without_slash(call.settings.dashboard_conductor),
        },
        headers=_NO_CACHE,
    )


def _without_slash(url: str | None) -> str | None:
    return url.rstrip("/") if url else None
