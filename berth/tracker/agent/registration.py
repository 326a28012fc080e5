"""``Registration``: the agent tells the conductors where it answers (its URL, its host's name and
zone, the token its API asks for) and keeps telling them, every ``interval`` seconds, as its
heartbeat; a host whose heartbeats stop is shown as down, and its servers may be evacuated.

Nothing has to list the agents in advance: the first heartbeat registers the host. A conductor
that does not answer, or refuses, is asked again at the next beat; the agent serves its claims
either way. The log says each reason once, when it starts (no conductor answers; the conductors
refuse the agent's token; they refuse the registration, saying why), again whenever it changes, and
that the registration was taken once it is again: a beat refused every ``interval`` seconds does
not fill the log, and a changed reason is never hidden behind the first one."""

from __future__ import annotations

import logging
import threading
from urllib.parse import quote

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
        token_setting: str = "the agent's token for the conductors",
    ):
        self.client = client
        self.host = host
        self.path = "/hosts/" + quote(host, safe="")
        self.body = {"host": {"url": url, "zone": zone, "agent_token": agent_token}}
        self.interval = interval
        # Where the operator sets the token the conductors read (the command's option), for the log.
        self.token_setting = token_setting
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Why the last beat failed, as last logged (None: it was taken, or none was made yet).
        self._failure: tuple[int, str | None] | None = None

    def beat(self) -> bool:
        """One registration; whether the conductors took it."""
        try:
            self.client.request("PUT", self.path, self.body)
        except ConductorError as e:
            failure = (e.status, e.code)
            if failure != self._failure:
                LOG.warning("%s; trying again every %gs", self._reason(e), self.interval)
            self._failure = failure
            return False
        if self._failure is not None:
            LOG.info("the conductors took %s's registration again", self.host)
        self._failure = None
        return True

    def _reason(self, error: ConductorError) -> str:
        """Why the conductors did not take the registration, in the words the operator acts on."""
        if error.status == 0:  # none answered: refused, unreachable, or no answer in time
            return f"{self.host}'s registration: {error.detail}"
        if error.status == 401:
            return (
                f"the conductors refused the agent's token (401), registering {self.host}: check {self.token_setting}"
            )
        detail = " ".join(error.detail.split())  # one line of the log, whatever the conductors wrote
        if error.status == 403:
            return (
                f"the conductors refused the agent's token (403: {detail}), registering {self.host}: it lacks "
                f"the role their policy asks (by default service or admin); check {self.token_setting}"
            )
        said = " ".join(part for part in (str(error.status), error.code, detail) if part)
        return f"the conductors did not take {self.host}'s registration ({said})"

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
