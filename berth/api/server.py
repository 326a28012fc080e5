"""``berth serve``: the Placement service under berth.web's multi-worker runner.

The schema is upgraded once, and the service's modules are imported once, in the master, before any
worker starts; each worker builds its own application and connection pool after the fork.
"""

from __future__ import annotations

import importlib

from berth.api.schemas import every_schema
from berth.api.settings import Settings
from berth.api.validation import compile_validators
from berth.store.database import Database
from berth.store.migrate import upgrade
from berth.web import server
from berth.web.collector import CollectorPausedDuringRequests


def serve(
    *,
    bind: str,
    database_url: str,
    workers: int,
    threads: int = 1,
    access_log: bool = False,
    settings: Settings | None = None,
    lease_check_interval: float = 0.0,
    log_format: str = "text",
) -> int:
    """Raises berth.web.server.AddressInUse when another process listens on ``bind``."""

    def prepare() -> None:
        db = Database(database_url)
        upgrade(db)
        db.dispose()
        # Import the application's modules (not the application: no database connection may cross
        # the fork) in the master, so that every worker shares their pages instead of loading its own.
        importlib.import_module("berth.api.wsgi")  # and through it the routes and every handler
        compile_validators(every_schema())

    def load_app() -> CollectorPausedDuringRequests:
        from berth.api.wsgi import create_app

        return create_app(database_url, settings, lease_check_interval=lease_check_interval, refresh_board=True)

    return server.serve(
        target="berth.api.wsgi:application",
        load_app=load_app,
        prepare=prepare,
        bind=bind,
        workers=workers,
        threads=threads,
        access_log=access_log,
        log_format=log_format,
        metrics=(settings or Settings()).metrics != "off",
    )
