"""``RegisteredAgents``: a client of each registered host's agent, by host name, as the steps of an
operation ask for them. A host that registers after the conductor started is found at first use;
a host that moved its agent to another address is called there, since the registration is read
again every few seconds."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from typing import Final

from berth.clients.agent import AgentClient
from berth.conductor.records.hosts import Hosts
from berth.domain.errors import NotFound

# How long a host's registration is used before it is read again.
FRESH_SECONDS: Final = 5.0
AGENT_TIMEOUT: Final = 60.0


class RegisteredAgents(Mapping[str, AgentClient]):
    def __init__(self, hosts: Hosts):
        self.hosts = hosts
        self._lock = threading.Lock()
        # Host -> (when read, the url and token it was made for, the client).
        self._clients: dict[str, tuple[float, tuple[str, str | None], AgentClient]] = {}

    def __getitem__(self, name: str) -> AgentClient:
        now = time.monotonic()
        with self._lock:
            kept = self._clients.get(name)
        if kept is not None and now - kept[0] < FRESH_SECONDS:
            return kept[2]
        try:
            host = self.hosts.get(name)
        except NotFound:
            raise KeyError(name) from None
        where = (host.url, host.agent_token)
        client = kept[2] if kept is not None and kept[1] == where else _client(*where)
        with self._lock:
            self._clients[name] = (now, where, client)
        return client

    def __iter__(self) -> Iterator[str]:
        return iter([h.name for h in self.hosts.all()])

    def __len__(self) -> int:
        return len(self.hosts.all())


def _client(url: str, token: str | None) -> AgentClient:
    return AgentClient(url, token=token, timeout=AGENT_TIMEOUT)
