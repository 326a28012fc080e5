"""The dashboard's paths: the public page and assets, and the JSON under the ``berth:dashboard`` rule."""

from __future__ import annotations

from berth.api.dashboard import assets, figures, pages
from berth.api.microversion import BASE
from berth.api.routing.route import Route, RouteTable

RULE = "berth:dashboard"

# What a browser fetches before it holds a token; matched exactly, so no other path becomes public.
PUBLIC_PATHS = frozenset(
    ["/dashboard", "/dashboard/", "/dashboard/config.json"]
    + [f"/dashboard/static/{name}" for name in assets.assets() if name != assets.PAGE]
)


def dashboard_routes() -> RouteTable:
    return {
        "/dashboard": {"GET": Route(pages.dashboard_page, BASE, None)},
        "/dashboard/config.json": {"GET": Route(pages.dashboard_config, BASE, None)},
        "/dashboard/static/<name>": {"GET": Route(pages.dashboard_asset, BASE, None)},
        "/berth/dashboard/summary": {"GET": Route(figures.summary, BASE, RULE)},
        "/berth/dashboard/totals": {"GET": Route(figures.totals, BASE, RULE)},
        "/berth/dashboard/rankings": {"GET": Route(figures.rankings, BASE, RULE)},
        "/berth/dashboard/providers": {"GET": Route(figures.providers, BASE, RULE)},
    }
