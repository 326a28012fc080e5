"""``RegisteredAgents``: a client of each registered host's agent, by host name, as the steps of an
operation ask for them. A host that registers after the conductor started is found at first use.
A host whose agent moved to another address (restarted on another port, or on another machine) is
called there once its registration is read again: every few seconds, and at once when its old
address refuses the connection, so that the first call after an agent's restart does not fail on
the address it left (a refused connection sent nothing, so the call is made again at the new one).
The registrations are read every few seconds all at once, in one query: read one host at a time,
as the operations asked for them, a cloud of a thousand hosts cost a query nearly every step."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any, Final

from berth.clients.agent import JSON, AgentClient
from berth.clients.http import JsonHttp, NotConnected
from berth.conductor.records.hosts import Hosts
from berth.domain.errors import NotFound

# How long a host's registration is used before it is read again.
FRESH_SECONDS: Final = 5.0
AGENT_TIMEOUT: Final = 60.0


class RegisteredAgents(Mapping[str, AgentClient]):
    def __init__(self, hosts: Hosts):
        self.hosts = hosts
        self._lock = threading.Lock()
        # One client a host, kept (claims hold it) and pointed at its agent's address as registered.
        self._clients: dict[str, RegisteredAgent] = {}
        # Every host's address and token as last read all at once, and when.
        self._addresses: dict[str, tuple[str, str | None]] = {}
        self._addresses_read_at = -FRESH_SECONDS

    def __getitem__(self, name: str) -> AgentClient:
        with self._lock:
            kept = self._clients.get(name)
        now = time.monotonic()
        if kept is not None and now - kept.read_at < FRESH_SECONDS:
            return kept
        if now - self._addresses_read_at >= FRESH_SECONDS:
            addresses = self.hosts.addresses()
            with self._lock:
                self._addresses, self._addresses_read_at = addresses, now
        address = self._addresses.get(name)
        if address is None:
            return self.read(name)  # registered since the last read, or not at all
        return self._point(name, *address, read_at=self._addresses_read_at)

    def read(self, name: str) -> RegisteredAgent:
        """The host's client, pointed at the address its registration names now."""
        now = time.monotonic()
        try:
            host = self.hosts.get(name)
        except NotFound:
            raise KeyError(name) from None
        return self._point(name, host.url, host.agent_token, read_at=now)

    def _point(self, name: str, url: str, token: str | None, *, read_at: float) -> RegisteredAgent:
        """The host's client, pointed at ``url`` with ``token`` as read at ``read_at``."""
        with self._lock:
            client = self._clients.get(name)
            if client is None:
                client = self._clients[name] = RegisteredAgent(self, name, url, token)
            elif read_at >= client.read_at:
                client.point_at(url, token)
            client.read_at = max(client.read_at, read_at)
        return client

    def __iter__(self) -> Iterator[str]:
        return iter([h.name for h in self.hosts.all()])

    def __len__(self) -> int:
        return len(self.hosts.all())


class RegisteredAgent(AgentClient):
    """The client of one registered host's agent, which follows the agent to the address it
    registered last when the one it knew refuses the connection."""

    def __init__(self, agents: RegisteredAgents, name: str, url: str, token: str | None):
        super().__init__(url, token=token, timeout=AGENT_TIMEOUT)
        self.agents = agents
        self.name = name
        self.token = token
        self.read_at = -FRESH_SECONDS

    def point_at(self, url: str, token: str | None) -> None:
        """Call the agent at ``url`` with ``token`` from now on (nothing changes when they are the same)."""
        url = url.rstrip("/")
        if (url, token) == (self.url, self.token):
            return
        self.http = JsonHttp(url, {"X-Auth-Token": token} if token else {}, timeout=AGENT_TIMEOUT)
        self.url, self.token = url, token

    def _call(self, method: str, path: str, body: JSON | None = None, params: dict[str, str] | None = None) -> Any:
        where = self.url
        try:
            return super()._call(method, path, body, params)
        except NotConnected:
            if not self._moved_from(where):
                raise
        return super()._call(method, path, body, params)

    def _moved_from(self, url: str) -> bool:
        """Whether the host's registration, read again, names an address other than ``url``."""
        try:
            self.agents.read(self.name)
        except KeyError:
            return False  # no longer registered: nowhere else to call
        return self.url != url
