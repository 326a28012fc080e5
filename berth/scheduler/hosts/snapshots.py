"""The compute agents' host snapshots, read at most once per host in one scheduling call.

The scheduler knows each agent by its host's name (the name of the host's root provider). A host
without a known agent, an agent that does not answer, or one whose snapshot describes another
provider tree gives a reason instead of a snapshot: a filter that needs the snapshot then refuses
the host, since the agent's claim could not be predicted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from berth.clients.agent import AgentClient
from berth.clients.errors import ClientError
from berth.clients.http import TransportError
from berth.domain.host.errors import InvalidSnapshot
from berth.domain.host.snapshot import HostSnapshot


class SnapshotSource(Protocol):
    def snapshot(self, host: str, root_uuid: str) -> HostSnapshot | str:
        """The host's snapshot, or why there is none."""
        ...


class AgentSnapshots:
    """Snapshots from the agents, by host name, each read once."""

    def __init__(self, agents: Mapping[str, AgentClient]):
        self.agents = agents
        self.read: dict[str, HostSnapshot | str] = {}

    def snapshot(self, host: str, root_uuid: str) -> HostSnapshot | str:
        if host not in self.read:
            self.read[host] = self._take(host, root_uuid)
        return self.read[host]

    def _take(self, host: str, root_uuid: str) -> HostSnapshot | str:
        agent = self.agents.get(host)
        if agent is None:
            return "no agent is known for this host"
        try:
            snapshot = agent.host_snapshot()
        except (ClientError, InvalidSnapshot, TransportError, ValueError) as e:
            return f"its agent did not give a snapshot: {e}"
        if snapshot.tree.root.uuid != root_uuid:
            return f"its agent describes another provider tree (root {snapshot.tree.root.uuid})"
        return snapshot
