"""Pieces shared by the commands that drive a running server: ``berth bench`` and ``berth stress``."""
from __future__ import annotations

import argparse
import importlib.util
import ipaddress
import os
import socket
import subprocess
import sys
import urllib.parse
from pathlib import Path

import requests


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def new_session(token: str, version: str) -> requests.Session:
    session = requests.Session()
    # No proxies, no .netrc: the traffic must stay on the loopback interface.
    session.trust_env = False
    session.headers.update({"X-Auth-Token": token, "OpenStack-API-Version": f"placement {version}",
                            "Accept": "application/json"})
    return session


def check_loopback_url(url: str, error: type[Exception]) -> str:
    """The URL without its trailing slash, or ``error`` unless it names a loopback address."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise error(f"--url must look like http://127.0.0.1:PORT, got {url!r}")
    host = parts.hostname
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise error(f"--url must point at the loopback interface (127.0.0.1), got host {host!r}")
    return url.rstrip("/")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load_pgserver(error: type[Exception], module_name: str):
    """tests/pgserver.py of the source checkout this package runs from."""
    import berth

    path = Path(berth.__file__).resolve().parent.parent / "tests" / "pgserver.py"
    if not path.is_file():
        raise error(f"--database postgresql needs {path} (a source checkout of Berth); not found")
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - e.g. psycopg missing
        raise error(f"--database postgresql: cannot import {path}: {e}") from e
    return module


def children_of(pid: int) -> list[int]:
    """Live (not zombie) children of ``pid``, from /proc/N/stat: after the last ')' come the state
    and the ppid (the command name before it may contain spaces and parentheses)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == pid and state not in ("Z", "X"):
            found.append(int(entry))
    return sorted(found)


def spawn_server(port: int, database_url: str, workers: int, logpath) -> subprocess.Popen:
    """``berth serve`` on 127.0.0.1:port in a process group of its own, logging to ``logpath``."""
    with open(logpath, "ab") as logfile:
        return subprocess.Popen(
            [sys.executable, "-m", "berth.cli.main", "serve", "--bind", f"127.0.0.1:{port}",
             "--database", database_url, "--workers", str(workers)],
            stdin=subprocess.DEVNULL, stdout=logfile, stderr=subprocess.STDOUT, start_new_session=True,
        )
