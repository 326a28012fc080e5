"""The simulation's client of the conductors' API: a session per worker thread, each thread starting
at another conductor so that the requests spread over them, and a request that may have reached a
conductor killed under it told apart from one that reached none.

A request no conductor accepted the connection for is sent to the next (it was never received), as
is a read whose connection broke; a change whose connection broke after it was sent is not sent
again (``Lost``): it may have started its operation, which the caller then looks for in the journal.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Final

import requests
import urllib3

from berth.clients.conductor import ConductorError
from berth.testbed.sim.layout import FLAVORS

TOKEN: Final = "admin"
# Long enough that only a conductor killed under a request leaves it unanswered.
TIMEOUT: Final = 120.0


class Lost(Exception):
    """The request was sent and its conductor went away before answering."""


class ConductorsApi:
    def __init__(self, urls: Sequence[str]):
        self.urls = list(urls)
        self._local = threading.local()
        self._turn = 0
        self._lock = threading.Lock()

    def _session(self) -> tuple[requests.Session, list[str]]:
        made: tuple[requests.Session, list[str]] | None = getattr(self._local, "made", None)
        if made is None:
            session = requests.Session()
            session.trust_env = False
            session.headers.update({"X-Auth-Token": TOKEN, "Accept": "application/json"})
            with self._lock:
                first = self._turn % len(self.urls)
                self._turn += 1
            made = self._local.made = (session, self.urls[first:] + self.urls[:first])
        return made

    def request(self, method: str, path: str, body: object = None) -> Any:
        session, urls = self._session()
        refused: list[str] = []
        for url in urls:
            try:
                response = session.request(method, url + path, json=body, timeout=TIMEOUT)
            except requests.ConnectionError as e:
                # A read may simply be asked again of another.
                if _never_sent(e) or method == "GET":
                    refused.append(url)
                    continue
                raise Lost(f"{method} {path} to {url}: {e}") from None
            except requests.Timeout as e:
                raise Lost(f"{method} {path} to {url}: {e}") from None
            if response.status_code >= 400:
                try:
                    first = response.json()["errors"][0]
                    code, detail = first.get("code"), str(first.get("detail"))
                except (ValueError, KeyError, IndexError, TypeError):
                    code, detail = None, response.text[:300]
                raise ConductorError(response.status_code, code, detail, method, path)
            return response.json() if response.content else None
        raise ConductorError(0, None, f"no conductor accepted the connection: {', '.join(refused)}", method, path)

    # -- what the run sets up through the API --------------------------------------------------

    def make_flavors(self) -> None:
        for choice in FLAVORS:
            f = choice.flavor
            body = {"name": f.name, "vcpus": f.vcpus, "ram": f.memory_mb, "disk": f.root_gb}
            body["extra_specs"] = dict(f.extra_specs)
            self.request("POST", "/flavors", {"flavor": body})

    def make_group(self, name: str) -> str:
        made = self.request("POST", "/os-server-groups", {"server_group": {"name": name, "policy": "anti-affinity"}})
        return str(made["server_group"]["id"])

    def register_hosts(self, hosts: list[dict[str, Any]]) -> None:
        self.request("PUT", "/hosts", {"hosts": hosts})


def _never_sent(error: requests.ConnectionError) -> bool:
    """Whether the connection was refused or never made (nothing of the request reached a conductor)."""
    reason = error.args[0] if error.args else None
    if isinstance(reason, urllib3.exceptions.MaxRetryError):
        reason = reason.reason
    return isinstance(reason, urllib3.exceptions.NewConnectionError | urllib3.exceptions.ConnectTimeoutError)
