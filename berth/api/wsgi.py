"""WSGI entry point: ``berth.api.wsgi:application`` for any WSGI server.

The database URL comes from ``BERTH_DATABASE_URL`` (a SQLite file in the current folder by default),
and the seconds between passes of the lease reaper from ``BERTH_LEASE_CHECK_INTERVAL``.  With several
worker processes, set ``PROMETHEUS_MULTIPROC_DIR`` to an empty folder before the server starts, or
``BERTH_METRICS=off``: otherwise each worker answers ``/metrics`` with its own counts alone.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from berth.api.app import PlacementApp
from berth.api.settings import Settings
from berth.store.database import Database
from berth.store.leases.reaper import DEFAULT_INTERVAL_S, LeaseReaper
from berth.web.access.keystone import keystone_wrapped
from berth.web.collector import CollectorPausedDuringRequests
from berth.web.cors import with_cors

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _flag(name: str, default: bool = False) -> bool:
    """The variable as a flag, as ``berth serve`` reads it: unset or empty gives the default."""
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw not in _TRUE + _FALSE:
        raise ValueError(f"${name}: expected true or false (also {'/'.join(_TRUE)} or {'/'.join(_FALSE)}), got {raw!r}")
    return raw in _TRUE


def _list(name: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in os.environ.get(name, "").split(",") if v.strip())


def settings_from_environment() -> Settings:
    return Settings(
        max_candidates=int(os.environ.get("BERTH_MAX_CANDIDATES", Settings.max_candidates)),
        randomize_candidates=_flag("BERTH_RANDOMIZE_CANDIDATES"),
        provider_cache_size=int(os.environ.get("BERTH_PROVIDER_CACHE_SIZE", Settings.provider_cache_size)),
        auth_strategy=os.environ.get("BERTH_AUTH_STRATEGY", Settings.auth_strategy),
        tokens_file=os.environ.get("BERTH_TOKENS_FILE") or None,
        policy_file=os.environ.get("BERTH_POLICY_FILE") or None,
        enforce_new_defaults=_flag("BERTH_ENFORCE_NEW_DEFAULTS", Settings.enforce_new_defaults),
        cors_allowed_origins=_list("BERTH_CORS_ALLOWED_ORIGIN"),
        cors_allow_headers=_list("BERTH_CORS_ALLOW_HEADERS"),
        metrics=os.environ.get("BERTH_METRICS") or Settings.metrics,
        dashboard_conductor=os.environ.get("BERTH_DASHBOARD_CONDUCTOR") or None,
        enforce_quotas_on_allocations=_flag("BERTH_ENFORCE_QUOTAS_ON_ALLOCATIONS"),
        pick_board=_flag("BERTH_PICK_BOARD", Settings.pick_board),
    )


def create_app(
    database_url: str | None = None,
    settings: Settings | None = None,
    *,
    lease_check_interval: float = 0.0,
    refresh_board: bool = False,
) -> CollectorPausedDuringRequests:
    """The application; with ``lease_check_interval`` above 0, also the lease reaper of this process,
    and with ``refresh_board`` the thread that keeps its picks' host board fresh (build it after any
    fork: threads do not cross one)."""
    settings = settings or settings_from_environment()
    db = Database(database_url)
    placement = PlacementApp(db, settings=settings)
    app: WSGIApplication = placement
    if lease_check_interval > 0:
        LeaseReaper(db, lease_check_interval).start()
    if refresh_board:
        placement.host_board.refresh_in_background(db, placement.provider_cache)
    if settings.auth_strategy == "keystone":
        # Version discovery, the probes and the dashboard's page go to the app unauthenticated, as
        # Placement lets GET / past its auth_token (clients ask it before they have a token).
        app = keystone_wrapped(app, placement.public_paths)
    if settings.cors_allowed_origins:
        app = with_cors(app, settings.cors_allowed_origins, settings.cors_allow_headers)
    return CollectorPausedDuringRequests(app)


def __getattr__(name: str) -> CollectorPausedDuringRequests:
    # Built on first access so that importing this module (e.g. in a server's master process
    # before it forks workers) opens no database connection.
    if name == "application":
        interval = os.environ.get("BERTH_LEASE_CHECK_INTERVAL") or DEFAULT_INTERVAL_S
        app = create_app(lease_check_interval=float(interval), refresh_board=True)
        globals()["application"] = app
        return app
    raise AttributeError(name)
