"""Running a WSGI service under Granian with several worker processes.

Each worker builds its own application (and so its own connection pool) after the fork; what every
worker would otherwise do alike (a schema upgrade, importing the application's modules) the service
does once, in the master, before any worker starts.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import ipaddress
import logging.config
import multiprocessing.util
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from granian.constants import HTTPModes, Interfaces
from granian.http import HTTP1Settings
from granian.log import LogLevels
from granian.server import Server

from berth.web.observability.multiprocess_dir import multiprocess_metrics_dir
from berth.web.observability.request_log import logging_config

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication


# What every refusal of an address to listen on asks for.
ADDRESS_FORM = "HOST:PORT with a port from 1 to 65535 (e.g. 127.0.0.1:8778)"


class BadAddress(ValueError):
    """An address to listen on that is not ``host:port``, or whose host name has no address."""


def listen_address(bind: str) -> tuple[str, int]:
    """``host:port`` as the IP address and port to listen on (Granian takes addresses, not names);
    :class:`BadAddress` saying what is wrong with it."""
    host, colon, port_text = bind.rpartition(":")
    # Port 0 is taken too: the kernel then picks a free port, as for any socket.
    if not colon or not (port_text.isascii() and port_text.isdigit()) or int(port_text) > 65535:
        raise BadAddress(f"{bind!r} is not an address to listen on: give {ADDRESS_FORM}")
    port = int(port_text)
    host = host.strip("[]") or "127.0.0.1"
    try:
        ipaddress.ip_address(host)
    except ValueError:
        try:
            host = str(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][4][0])
        except (OSError, UnicodeError) as error:
            reason = getattr(error, "strerror", None) or str(error)
            raise BadAddress(
                f"{bind!r}: no address found for the host {host!r} ({reason}); give {ADDRESS_FORM}"
            ) from None
    return host, port


class AddressInUse(Exception):
    """Another process listens on the address the server was told to bind."""

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
    target: str,
    load_app: Callable[[], WSGIApplication],
    bind: str,
    workers: int,
    prepare: Callable[[], None] | None = None,
    threads: int = 1,
    access_log: bool = False,
    log_format: str = "text",
    metrics: bool = True,
    on_worker_exit: Callable[[], None] | None = None,
    backlog: int = 1024,
) -> int:
    """Serve the application ``load_app`` builds in each worker on ``bind`` until stopped.

    ``target`` (``module:attribute``) only names the processes; ``prepare`` runs once in the master,
    after the address is found free and before any worker forks; ``on_worker_exit`` runs in a
    worker that stops (not in one killed). Raises :class:`AddressInUse` when another process
    listens on ``bind``.
    """
    # Every line from here on in ``log_format``, the master's before Granian applies the same
    # configuration to it and its workers: the schema's upgrade in ``prepare`` logs (Alembic's lines).
    logging.config.dictConfig(logging_config(log_format))
    with contextlib.ExitStack() as stack:
        if metrics:
            # Before the application's modules are imported: prometheus_client reads it as it loads.
            stack.enter_context(multiprocess_metrics_dir())
        host, port = listen_address(bind)
        _refuse_taken_address(host, port)
        if prepare is not None:
            prepare()
        # Whatever prepare imported is shared by every worker's pages; frozen, the collector of each
        # worker leaves those objects, and so their pages, alone.
        gc.collect()
        gc.freeze()

        def load_frozen_app() -> WSGIApplication:
            app = load_app()
            if on_worker_exit is not None:
                # A worker is a multiprocessing child: its exit runs multiprocessing's finalizers,
                # not ``atexit``'s, once Granian has stopped serving.
                multiprocessing.util.Finalize(None, on_worker_exit, exitpriority=10)
            # Everything built so far lives as long as the worker: keep the collector from walking it
            # again and again while requests allocate their short-lived objects.
            gc.collect()
            gc.freeze()
            return app

        server = Server(
            target,
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
            backlog=backlog,
        )
        server.serve(target_loader=load_frozen_app, wrap_loader=False)
        return 0
