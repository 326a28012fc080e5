"""WSGI entry point: ``berth.api.wsgi:application`` for any WSGI server.

The database URL comes from ``BERTH_DATABASE_URL`` (a SQLite file in the current folder by default).
"""
from __future__ import annotations

import os

from berth.api.app import PlacementApp, Settings
from berth.store.database import Database


def settings_from_environment() -> Settings:
    return Settings(
        max_candidates=int(os.environ.get("BERTH_MAX_CANDIDATES", Settings.max_candidates)),
        randomize_candidates=os.environ.get("BERTH_RANDOMIZE_CANDIDATES", "").lower() in ("1", "true", "yes"),
    )


def create_app(database_url: str | None = None, settings: Settings | None = None) -> PlacementApp:
    return PlacementApp(Database(database_url), settings=settings or settings_from_environment())


def __getattr__(name):
    # Built on first access so that importing this module (e.g. in a server's master process
    # before it forks workers) opens no database connection.
    if name == "application":
        app = create_app()
        globals()["application"] = app
        return app
    raise AttributeError(name)
