"""OpenStack Placement itself (the reference, installed with the tests' extra) served on a loopback
port from a SQLite file without authentication (noauth2), for the tests that move its books."""

from __future__ import annotations

import contextlib
import threading
import wsgiref.simple_server
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from oslo_config import cfg
from placement import conf as placement_conf
from placement import db_api as placement_db_api
from placement import deploy as placement_deploy


class _QuietHandler(wsgiref.simple_server.WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def served_placement(folder: Path, wrap: Callable[[Any], Any] = lambda app: app) -> Iterator[str]:
    """Placement's URL while it is served, its SQLite file in ``folder``; ``wrap`` is given its WSGI
    application and answers the one served. Its database engine is global to the process (one per
    test process, whichever module configures it first)."""
    config_file = folder / "placement.conf"
    config_file.write_text(
        "[api]\nauth_strategy = noauth2\n"
        f"[placement_database]\nconnection = sqlite:///{folder / 'placement.sqlite'}\nsync_on_startup = true\n"
    )
    config = cfg.ConfigOpts()
    placement_conf.register_opts(config)
    config([], project="placement", default_config_files=[str(config_file)])
    placement_db_api.configure(config)
    app = wrap(placement_deploy.loadapp(config))
    server = wsgiref.simple_server.make_server("127.0.0.1", 0, app, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
