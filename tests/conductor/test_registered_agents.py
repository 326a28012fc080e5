"""The conductor's clients of registered agents (``RegisteredAgents``) follow an agent that restarted
at another address: the first call after its new registration reaches it, though the client read
the old address less than ``FRESH_SECONDS`` ago; an address that refuses while the registration
still names it is an error, as it was."""

from __future__ import annotations

import pytest
from agenthelpers import TOKEN

from berth.clients.http import NotConnected
from berth.conductor.control import agents as agents_module
from berth.conductor.control.agents import RegisteredAgents
from berth.conductor.journal import Journal
from berth.conductor.records.hosts import Hosts

pytestmark = pytest.mark.slow


def test_a_restarted_agent_is_called_at_its_new_address_at_once(cloud, tmp_path):
    journal = Journal(f"sqlite:///{tmp_path / 'journal.sqlite'}")
    hosts = Hosts(journal.engine, down_after=60.0)
    agent = cloud["narrow-1"]
    hosts.register("narrow-1", agent.url, None, TOKEN, "admin", admin=True)
    agents = RegisteredAgents(hosts)
    client = agents["narrow-1"]
    assert client.capacity()["host"] == "narrow-1"

    agent.stop(sig=9)
    with pytest.raises(NotConnected):
        client.capacity()  # registered nowhere else: the refusal stands
    old = agent.url
    agent.start()  # on another free port, as a restarted agent would be
    assert agent.url != old
    hosts.register("narrow-1", agent.url, None, TOKEN, "admin", admin=True)
    # The same client (claims keep theirs) and the mapping's, both read before the move.
    assert client.capacity()["host"] == "narrow-1"
    assert agents["narrow-1"] is client and client.url == agent.url


def test_hosts_are_looked_up_from_one_read_of_every_registration_and_new_ones_at_first_use(tmp_path, monkeypatch):
    journal = Journal(f"sqlite:///{tmp_path / 'journal.sqlite'}")
    hosts = Hosts(journal.engine, down_after=60.0)
    for name in ("a", "b", "c"):
        hosts.register(name, f"http://{name}:1", None, TOKEN, "admin", admin=True)
    reads: list[str] = []
    addresses, get = hosts.addresses, hosts.get
    monkeypatch.setattr(hosts, "addresses", lambda: reads.append("every host") or addresses())
    monkeypatch.setattr(hosts, "get", lambda name: reads.append(name) or get(name))
    agents = RegisteredAgents(hosts)
    assert [agents[name].url for name in ("a", "b", "c")] == ["http://a:1", "http://b:1", "http://c:1"]
    assert reads == ["every host"]
    # Registered after that read: found at its first use, by a read of its own.
    hosts.register("d", "http://d:1", None, TOKEN, "admin", admin=True)
    reads.clear()
    assert agents["d"].url == "http://d:1" and reads == ["d"]
    with pytest.raises(KeyError):
        agents["nowhere"]
    # Once the read is older than FRESH_SECONDS, the next lookup reads every host again, and a
    # host registered at a new address since is called there.
    hosts.register("a", "http://a:2", None, TOKEN, "admin", admin=True)
    reads.clear()
    monkeypatch.setattr(agents_module, "FRESH_SECONDS", 0.0)
    assert agents["a"].url == "http://a:2" and reads == ["every host"]
