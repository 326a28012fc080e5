"""Running the API under Granian with several worker processes.

Each worker builds its own application and connection pool after the fork; the schema is upgraded
once, and the application's modules are imported once, in the master, before any worker starts.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import importlib
import ipaddress
import socket

from granian.constants import HTTPModes, Interfaces
from granian.http import HTTP1Settings
from granian.log import LogLevels
from granian.server import Server

from berth.api.collector import CollectorPausedDuringRequests
from berth.api.observability.multiprocess_dir import multiprocess_metrics_dir
from berth.api.observability.request_log import logging_config
from berth.api.schemas import every_schema
from berth.api.settings import Settings
from berth.api.validation import compile_validators
from berth.store.database import Database
from berth.store.migrate import upgrade


def _address(bind: str) -> tuple[str, int]:
    """``host:port`` as the IP address and port to listen on (Granian takes addresses, not names)."""
    host, _, port = bind.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        ipaddress.ip_address(host)
    except ValueError:
        host = str(socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)[0][4][0])
    return host, int(port)


class AddressInUse(Exception):
    """Another process listens on the address ``berth serve`` was told to bind."""

    def __init__(self, host: str, port: int):
        super().__init__(f"{host}:{port}")
        self.host = host
        self.port = port


def _refuse_taken_address(host: str, port: int) -> None:
    """Raise :class:`AddressInUse` when a socket already listens on ``host:port``.

    Granian binds its socket with SO_REUSEPORT, under which the kernel lets a second server listen on
    the same port and shares the connections between the two. A probe bound without SO_REUSEPORT
    fails as soon as any socket listens there; SO_REUSEADDR keeps the connections of a server that
    just stopped (TIME_WAIT) from counting as a listener.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise AddressInUse(host, port) from None
            raise


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
    with contextlib.ExitStack() as stack:
        if (settings or Settings()).metrics != "off":
            # Before the application's modules are imported: prometheus_client reads it as it loads.
            stack.enter_context(multiprocess_metrics_dir())
        return _serve(bind, database_url, workers, threads, access_log, settings, lease_check_interval, log_format)


def _serve(
    bind: str,
    database_url: str,
    workers: int,
    threads: int,
    access_log: bool,
    settings: Settings | None,
    lease_check_interval: float,
    log_format: str,
) -> int:
    host, port = _address(bind)
    _refuse_taken_address(host, port)
    db = Database(database_url)
    upgrade(db)
    db.dispose()

    def load_app() -> CollectorPausedDuringRequests:
        from berth.api.wsgi import create_app

        app = create_app(database_url, settings, lease_check_interval=lease_check_interval, refresh_board=True)
        # Everything built so far lives as long as the worker: keep the collector from walking it
        # again and again while requests allocate their short-lived objects.
        gc.collect()
        gc.freeze()
        return app

    # Import the application's modules (not the application: no database connection may cross the
    # fork) in the master, so that every worker shares their pages instead of loading its own copy;
    # frozen, the collector of each worker leaves those objects, and so their pages, alone.
    importlib.import_module("berth.api.wsgi")  # and through it the routes and every handler
    compile_validators(every_schema())
    gc.collect()
    gc.freeze()
    server = Server(
        # Only names the processes: every worker builds its application with load_app.
        "berth.api.wsgi:application",
        address=host,
        port=port,
        interface=Interfaces.WSGI,
        workers=workers,
        blocking_threads=threads,
        http=HTTPModes.http1,
        http1_settings=HTTP1Settings(keep_alive=True),
        log_access=access_log,
        log_level=LogLevels.info,
        log_dictconfig=logging_config(log_format),
        respawn_failed_workers=True,
        respawn_interval=0.5,
        workers_kill_timeout=10,
    )
    server.serve(target_loader=load_app, wrap_loader=False)
    return 0
