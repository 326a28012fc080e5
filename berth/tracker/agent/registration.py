"""``Registration``: the agent tells the conductors where it answers (its URL, its host's name and
zone, the token its API asks for) and keeps telling them, every ``interval`` seconds, as its
heartbeat; a host whose heartbeats stop is shown as down, and its servers may be evacuated.

Nothing has to list the agents in advance: the first heartbeat registers the host. A conductor
that does not answer is logged and asked again at the next beat; the agent serves its claims
either way."""

from __future__ import annotations

import logging
import threading

from berth.clients.conductor import ConductorClient, ConductorError

LOG = logging.getLogger(__name__)


class Registration:
    def __init__(
        self,
        client: ConductorClient,
        host: str,
        url: str,
        *,
        zone: str | None,
        agent_token: str | None,
        interval: float,
    ):
        self.client = client
        self.host = host
        self.body = {"host": {"url": url, "zone": zone, "agent_token": agent_token}}
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False

    def beat(self) -> bool:
        """One registration; whether the conductors took it."""
        try:
            self.client.request("PUT", f"/hosts/{self.host}", self.body)
        except ConductorError as e:
            if not self._failing:
                LOG.warning("the conductors did not take %s's registration (%s); trying again", self.host, e)
            self._failing = True
            return False
        if self._failing:
            LOG.info("the conductors took %s's registration again", self.host)
        self._failing = False
        return True

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="registration", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.beat()
        while not self._stop.wait(self.interval):
            self.beat()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
