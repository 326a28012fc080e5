"""The capacity dashboard: a read-only page at ``/dashboard`` and the JSON it polls.

The page and its assets (``static/``: HTML, CSS and JavaScript modules, no build step) are public, as
a browser cannot send a token when it opens a page; everything they show comes from
``/berth/dashboard/totals``, ``/berth/dashboard/rankings``, ``/berth/dashboard/providers`` and
``/metrics``, which take the API's token and policy (``berth:dashboard``), as does
``/berth/dashboard/summary`` (the totals and the rankings in one answer).
"""

from __future__ import annotations

from berth.api.dashboard.routes import PUBLIC_PATHS, dashboard_routes

__all__ = ["PUBLIC_PATHS", "dashboard_routes"]
