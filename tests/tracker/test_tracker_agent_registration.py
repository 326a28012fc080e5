"""``berth agent``'s registration with the conductors, as an operator reads it in the agent's log,
and the host names it refuses at start. Real processes: the session's ``berth serve``, a
``berth agent``, and a ``berth conductor`` started, stopped and started again on one port."""

from __future__ import annotations

import os
import re
import select
import time

import pytest
from agenthelpers import Agent
from livehelpers import free_port, run_berth

from berth.testbed.services.conductor import ConductorProcess
from berth.tracker.errors import ConfigError

TOKEN = "agent-s3cret"
# What the agent logs of its registration (berth/tracker/agent/registration.py).
NO_ANSWER = "no conductor answered"
REFUSED = "the conductors refused the agent's token"
TAKEN = "the conductors took"


class Log:
    """What a running agent has written so far (its stdout and stderr, one pipe)."""

    def __init__(self, agent: Agent):
        self.fd = agent.process.stdout.fileno()
        self.text = ""

    def read(self) -> str:
        while select.select([self.fd], [], [], 0)[0]:
            chunk = os.read(self.fd, 65536)
            if not chunk:
                break
            self.text += chunk.decode(errors="replace")
        return self.text

    def wait_for(self, needle: str, after: int = 0, timeout: float = 30.0) -> int:
        """Where ``needle`` is first written at or after offset ``after``, once it is."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.read().find(needle, after)
            if found >= 0:
                return found
            time.sleep(0.1)
        raise AssertionError(f"the agent did not log {needle!r}:\n{self.text[after:]}")


def _conductor(placement_url, tmp_path, port, tokens):
    path = tmp_path / f"tokens-{port}-{'-'.join(r for _, r in tokens.values())}.yaml"
    path.write_text("tokens:\n" + "".join(f"  {t}: {{user_id: {u}, roles: [{r}]}}\n" for t, (u, r) in tokens.items()))
    extra = ["--auth-strategy", "tokens", "--tokens-file", str(path)]
    return ConductorProcess(
        placement_url, f"sqlite:///{tmp_path / 'conductor.sqlite'}", str(tmp_path), extra=extra
    ).start(port)


def _registration_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "berth.tracker.agent.registration" in line]


def test_each_reason_a_registration_fails_for_is_logged_once_and_the_recovery_too(placement_service, tmp_path):
    port = free_port()
    beat = 0.2
    extra = ["--conductor", f"http://127.0.0.1:{port}", "--conductor-token", TOKEN, "--heartbeat-interval", str(beat)]
    agent = Agent(placement_service.url, tmp_path, extra=extra)
    conductor = None
    try:
        log = Log(agent)
        # No conductor yet: the connection fails at every beat.
        seen = log.wait_for(NO_ANSWER)
        time.sleep(6 * beat)
        # A conductor that does not know the agent's token: 401 at every beat.
        conductor = _conductor(placement_service.url, tmp_path, port, {"other": ("ops", "admin")})
        seen = log.wait_for(REFUSED, seen)
        time.sleep(6 * beat)
        conductor.stop()
        seen = log.wait_for(NO_ANSWER, seen)
        # Back, knowing the token as a reader's, whom the policy does not let register: 403.
        conductor = _conductor(placement_service.url, tmp_path, port, {TOKEN: ("agent", "reader")})
        seen = log.wait_for(REFUSED, seen)
        time.sleep(6 * beat)
        conductor.stop()
        seen = log.wait_for(NO_ANSWER, seen)
        # Back, knowing the token as a service's: the registration is taken.
        conductor = _conductor(placement_service.url, tmp_path, port, {TOKEN: ("agent", "service")})
        log.wait_for(TAKEN, seen)
        time.sleep(6 * beat)
    finally:
        text = agent.stop()
        if conductor is not None:
            conductor.stop()
    lines = _registration_lines(log.text + text)
    said = [next(what for what in (NO_ANSWER, REFUSED, TAKEN) if what in line) for line in lines]
    assert said == [NO_ANSWER, REFUSED, NO_ANSWER, REFUSED, NO_ANSWER, TAKEN], "\n".join(lines)
    unknown, not_allowed = lines[1], lines[3]
    assert "(401)" in unknown and "check --conductor-token ($BERTH_CONDUCTOR_TOKEN)" in unknown, unknown
    assert "(403: " in not_allowed and "lacks the role" in not_allowed, not_allowed
    assert "check --conductor-token ($BERTH_CONDUCTOR_TOKEN)" in not_allowed, not_allowed
    assert TOKEN not in log.text + text  # a token is a secret, even in a log
    assert "Traceback" not in log.text + text


@pytest.mark.parametrize("host", ["rack1/node 7", "node 7", "rack1/node7", "..", "-node", "nöde", "n%2Fx", "a" * 181])
def test_a_host_name_the_conductors_and_the_store_cannot_take_is_refused_at_start(tmp_path, host):
    state = tmp_path / "state"
    done = run_berth(
        "agent", "--host", host, "--driver", "fake", "--state-dir", str(state), "--placement", "http://127.0.0.1:1"
    )
    assert done.returncode == 2, done
    assert re.search(r"letters, digits, '-', '_' and '\.', the first a letter or a digit", done.stderr), done.stderr
    assert done.stderr.startswith(f"berth agent: --host {host!r}: "), done.stderr
    assert not state.exists()  # nothing was made: no claim store, no subfolder


def test_a_tracker_refuses_such_a_name_too(hosts, tmp_path):
    """Built in a process of its own (the simulator's host pool), a tracker refuses the name before
    it makes its claim store."""
    with pytest.raises(ConfigError, match=r"host 'rack1/node 7': ' ', '/' not allowed: a host name is 1 to 180"):
        hosts("rack1/node 7", start=False)
    assert not (tmp_path / "state" / "rack1").exists()
