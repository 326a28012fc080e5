"""``Registration``: the agent tells the conductors where it answers (its URL, its host's name and
zone, the token its API asks for, its own id) and keeps telling them, every ``interval`` seconds,
as its heartbeat; a host whose heartbeats stop is shown as down, and its servers may be evacuated.

Nothing has to list the agents in advance: the first heartbeat registers the host. A conductor
that does not answer, or refuses, is asked again at the next beat; the agent serves its claims
either way. The log says each reason once, when it starts (no conductor answers; the conductors
refuse the agent's token; another agent holds the host's name; they refuse the registration, saying
why), again whenever it changes, and that the registration was taken once it is again: a beat
refused every ``interval`` seconds does not fill the log, and a changed reason is never hidden
behind the first one.

The conductors refuse a host's name to an agent while another agent, whose heartbeats are fresh,
holds it (its id is another: its claim store is another). ``berth agent`` asks them whether they
would take its registration before it reports the host or serves anything (``check_name``: the
registration checked and not made, since the conductors would call an agent registered before it
listens) and exits when the name is taken, so that a second agent started by mistake under a live
one's name touches nothing.
An agent refused later (the conductors gave the name to another agent while this one was silent
long enough to be seen down) keeps beating: it holds claims and guests a stop would leave behind,
and it takes the name back should the other stop."""

from __future__ import annotations

import logging
import threading
from urllib.parse import quote

from berth.clients.conductor import HOST_NAME_TAKEN, ConductorClient, ConductorError

LOG = logging.getLogger(__name__)


class HostNameTaken(Exception):
    """The conductors refused the registration: another agent, alive, holds the host's name. The
    message says so, where that agent answers, and what to do, in one line."""


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
        agent_id: str | None = None,
        token_setting: str = "the agent's token for the conductors",
        host_setting: str = "another host name",
    ):
        self.client = client
        self.host = host
        self.path = "/hosts/" + quote(host, safe="")
        self.body = {"host": {"url": url, "zone": zone, "agent_token": agent_token, "agent_id": agent_id}}
        self.interval = interval
        # Where the operator sets the token the conductors read, and the host's name (the command's
        # options), for the log.
        self.token_setting = token_setting
        self.host_setting = host_setting
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Why the last beat failed, as last logged (None: it was taken, or none was made yet).
        self._failure: tuple[int, str | None] | None = None

    def check_name(self) -> None:
        """The registration checked by the conductors and not made (``?dry_run=1``), before the agent
        reports its host or serves anything: ``HostNameTaken`` when another agent holds the host's
        name. Any other failure is left to the beats that follow, which log it as they go on."""
        try:
            self.client.request("PUT", self.path + "?dry_run=1", self.body)
        except ConductorError as e:
            if e.code == HOST_NAME_TAKEN:
                raise HostNameTaken(self._reason(e)) from None

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
        if self._failure is not None and self._failure[1] == HOST_NAME_TAKEN:
            LOG.warning("the conductors took %s's registration: the agent that held the name is seen down", self.host)
        elif self._failure is not None:
            LOG.info("the conductors took %s's registration again", self.host)
        self._failure = None
        return True

    def _reason(self, error: ConductorError) -> str:
        """Why the conductors did not take the registration, in the words the operator acts on."""
        if error.code == HOST_NAME_TAKEN:
            # Their own words (where the other agent answers, and since when it is silent) without
            # the status's standard explanation before them.
            said = " ".join(error.detail.split("\n\n", 1)[-1].split()).rstrip(".")
            return (
                f"another agent already serves host {self.host}; stop it, or start this one under "
                f"{self.host_setting}. The conductors say: {said}"
            )
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
