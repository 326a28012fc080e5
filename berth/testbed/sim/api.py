"""The simulation's client of the conductors' API: connections of its own for each worker thread, each thread starting
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

from berth.clients.conductor import ConductorError
from berth.clients.http import JsonHttp, NotConnected, ReadTimedOut, TransportError
from berth.testbed.sim.cloud.layout import FLAVORS, HIGH_FLAVORS

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

    def _conductors(self) -> list[JsonHttp]:
        """The calling thread's clients of the conductors, each thread starting with another one."""
        made: list[JsonHttp] | None = getattr(self._local, "made", None)
        if made is None:
            with self._lock:
                first = self._turn % len(self.urls)
                self._turn += 1
            headers = {"X-Auth-Token": TOKEN, "Accept": "application/json"}
            made = self._local.made = [
                JsonHttp(url, headers, timeout=TIMEOUT) for url in self.urls[first:] + self.urls[:first]
            ]
        return made

    def request(self, method: str, path: str, body: object = None) -> Any:
        refused: list[str] = []
        for conductor in self._conductors():
            url = conductor.base_url
            try:
                response = conductor.request(method, path, body)
            except NotConnected:
                refused.append(url)
                continue
            except ReadTimedOut as e:
                raise Lost(f"{method} {path} to {url}: {e}") from None
            except TransportError as e:
                # A read may simply be asked again of another.
                if method == "GET":
                    refused.append(url)
                    continue
                raise Lost(f"{method} {path} to {url}: {e}") from None
            if response.status >= 400:
                try:
                    first = response.json()["errors"][0]
                    code, detail = first.get("code"), str(first.get("detail"))
                except (ValueError, KeyError, IndexError, TypeError):
                    code, detail = None, response.text[:300]
                raise ConductorError(response.status, code, detail, method, path)
            return response.json() if response.content else None
        raise ConductorError(0, None, f"no conductor accepted the connection: {', '.join(refused)}", method, path)

    # -- what the run sets up through the API --------------------------------------------------

    def make_flavors(self) -> None:
        for choice in (*FLAVORS, *HIGH_FLAVORS):
            f = choice.flavor
            body = {"name": f.name, "vcpus": f.vcpus, "ram": f.memory_mb, "disk": f.root_gb}
            body["extra_specs"] = dict(f.extra_specs)
            self.request("POST", "/flavors", {"flavor": body})

    def make_group(self, name: str) -> str:
        made = self.request("POST", "/os-server-groups", {"server_group": {"name": name, "policy": "anti-affinity"}})
        return str(made["server_group"]["id"])

    def register_hosts(self, hosts: list[dict[str, Any]]) -> None:
        self.request("PUT", "/hosts", {"hosts": hosts})
