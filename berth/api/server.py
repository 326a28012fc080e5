"""Running the API under gunicorn with several worker processes.

Each worker builds its own application and connection pool after the fork; the schema is upgraded
once, and the application's modules are imported once, in the master, before any worker starts.
"""
from __future__ import annotations

import gc

from gunicorn.app.base import BaseApplication

from berth.api.app import Settings
from berth.store.database import Database
from berth.store.migrate import upgrade


class _Server(BaseApplication):
    def __init__(self, options, database_url, settings):
        self._options = options
        self._database_url = database_url
        self._settings = settings
        super().__init__()

    def load_config(self):
        for key, value in self._options.items():
            self.cfg.set(key, value)

    def load(self):
        from berth.api.wsgi import create_app

        app = create_app(self._database_url, self._settings)
        # Everything built so far lives as long as the worker: keep the collector from walking it
        # again and again while requests allocate their short-lived objects.
        gc.collect()
        gc.freeze()
        return app


def serve(*, bind: str, database_url: str, workers: int, threads: int = 1, access_log: bool = False,
          settings: Settings | None = None) -> int:
    db = Database(database_url)
    upgrade(db)
    db.dispose()
    options = {
        "bind": bind,
        "workers": workers,
        "threads": threads,
        # gthread even with one thread: unlike sync workers it keeps client connections alive.
        "worker_class": "gthread",
        "timeout": 60,
        "graceful_timeout": 10,
        "keepalive": 5,
        # A listening socket per worker (SO_REUSEPORT): the kernel spreads new connections over the
        # workers.  With one shared socket the first worker to wake accepts every connection that
        # arrives together, and clients that keep their connections alive stay on that one process.
        "reuse_port": True,
        "preload_app": False,
        # A control socket in the home folder would clash between several servers on one host.
        "control_socket_disable": True,
    }
    if access_log:
        options["accesslog"] = "-"
    # Import the application's modules (not the application: no database connection may cross the
    # fork) in the master, so that every worker shares their pages instead of loading its own copy;
    # frozen, the collector of each worker leaves those objects, and so their pages, alone.
    import berth.api.wsgi  # noqa: F401 - and through it the routes and every handler
    gc.collect()
    gc.freeze()
    _Server(options, database_url, settings).run()
    return 0
