"""Pieces shared by the commands that drive a running server: ``berth bench`` and ``berth stress``."""

from __future__ import annotations

import argparse
import importlib.util
import io
import ipaddress
import os
import socket
import subprocess
import sys
import urllib.parse
from pathlib import Path

import orjson
import pycurl
import requests

# Worker processes of ``berth serve`` unless told otherwise: one more than the cores, so that one
# can run while another waits on its database; more only take turns on the cores (on two, three
# workers built providers faster than four: docs/performance.md).  At most four, to bound memory.
DEFAULT_WORKERS = min(4, (os.cpu_count() or 1) + 1)


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
    session.headers.update(
        {"X-Auth-Token": token, "OpenStack-API-Version": f"placement {version}", "Accept": "application/json"}
    )
    return session


class Response:
    __slots__ = ("status_code", "content")

    def __init__(self, status_code: int, content: bytes):
        self.status_code = status_code
        self.content = content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self):
        return orjson.loads(self.content)


class KeepAliveClient:
    """One persistent HTTP/1.1 connection to a loopback server, for load generators (libcurl).

    The load generator shares the machine's cores with the server under test, so its own cost per
    request is taken from the server's: ``requests`` spends about a millisecond of Python per call,
    ``http.client`` on a kept-alive connection about 260 µs of CPU, libcurl through pycurl about
    110 µs.  libcurl keeps the connection open between requests, and sends a request once more on a
    new connection only when a reused one turns out to have been closed by the server before it
    answered (the keep-alive timeout ran out between two requests).
    """

    def __init__(self, base_url: str, headers: dict[str, str], timeout: float):
        self.base_url = base_url.rstrip("/")
        self.headers = dict(headers)
        self.curl = pycurl.Curl()
        self.curl.setopt(pycurl.TIMEOUT_MS, int(timeout * 1000))
        self.curl.setopt(pycurl.CONNECTTIMEOUT_MS, int(timeout * 1000))
        self.curl.setopt(pycurl.NOSIGNAL, 1)
        # The traffic stays on the loopback interface: no proxy from the environment.
        self.curl.setopt(pycurl.PROXY, "")

    def request(self, method: str, path: str, body=None, headers: dict[str, str] | None = None) -> Response:
        all_headers = dict(self.headers)
        if headers:
            all_headers.update(headers)
        curl = self.curl
        curl.setopt(pycurl.URL, self.base_url + path)
        if body is not None:
            all_headers["Content-Type"] = "application/json"
            payload = orjson.dumps(body)
            curl.setopt(pycurl.POSTFIELDS, payload)
            curl.setopt(pycurl.POSTFIELDSIZE, len(payload))
        elif method in ("POST", "PUT"):
            curl.setopt(pycurl.POSTFIELDS, b"")
            curl.setopt(pycurl.POSTFIELDSIZE, 0)
        else:
            curl.setopt(pycurl.HTTPGET, 1)
        # After POSTFIELDS, which would make it a POST; also for GET, to undo an earlier DELETE.
        curl.setopt(pycurl.CUSTOMREQUEST, method)
        # "Expect: 100-continue" would cost a round trip (and libcurl's wait) for larger bodies.
        curl.setopt(pycurl.HTTPHEADER, [f"{k}: {v}" for k, v in all_headers.items()] + ["Expect:"])
        buffer = io.BytesIO()
        curl.setopt(pycurl.WRITEDATA, buffer)
        try:
            curl.perform()
        except pycurl.error as error:
            raise ConnectionError(f"{method} {path}: {error.args[-1]}") from None
        return Response(curl.getinfo(pycurl.RESPONSE_CODE), buffer.getvalue())

    def get(self, path: str) -> Response:
        return self.request("GET", path)

    def close(self) -> None:
        self.curl.close()


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
            [
                sys.executable,
                "-m",
                "berth.cli.main",
                "serve",
                "--bind",
                f"127.0.0.1:{port}",
                "--database",
                database_url,
                "--workers",
                str(workers),
            ],
            stdin=subprocess.DEVNULL,
            stdout=logfile,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
