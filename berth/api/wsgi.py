"""WSGI entry point: ``berth.api.wsgi:application`` for any WSGI server.

The database URL comes from ``BERTH_DATABASE_URL`` (a SQLite file in the current folder by default).
"""
from __future__ import annotations

from berth.api.app import PlacementApp
from berth.store.database import Database


def create_app(database_url: str | None = None) -> PlacementApp:
    return PlacementApp(Database(database_url))


def __getattr__(name):
    # Built on first access so that importing this module (e.g. in a server's master process
    # before it forks workers) opens no database connection.
    if name == "application":
        app = create_app()
        globals()["application"] = app
        return app
    raise AttributeError(name)
