"""What the cloud audit reads: the service's books (through the Placement API only) and each
agent's own (its host, its providers, its claims, the guests its driver runs, and the agent's own
audit of its host, read without healing).

Reading costs two requests per provider (inventories, allocations), one per consumer that holds
allocations on two hosts (its consumer type) and four per agent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from berth.clients.agent import AgentClient
from berth.clients.errors import ClientError, PlacementError
from berth.clients.http import TransportError
from berth.clients.placement import PlacementClient
from berth.domain.host.records import MOVING, OUTGOING
from berth.scheduler.service import COMPUTE_NODE_TRAIT

LEASES_PATH = "/berth/leases"


@dataclass
class ClaimView:
    """One claim of an agent, as far as the cloud audit needs it."""

    claim_id: str
    instance_uuid: str
    consumer_uuid: str
    state: str
    migration_uuid: str | None


@dataclass
class AgentView:
    """One agent as it answered; ``error`` set (and nothing else known) when it did not."""

    client: AgentClient
    host: str
    providers: set[str] = field(default_factory=set)
    claims: list[ClaimView] = field(default_factory=list)
    guests: set[str] = field(default_factory=set)
    findings: list[dict[str, Any]] = field(default_factory=list)  # the agent's own audit, unhealed
    error: str | None = None

    @property
    def reachable(self) -> bool:
        return self.error is None


@dataclass
class Provider:
    uuid: str
    name: str
    root: str
    inventories: dict[str, dict[str, Any]]
    allocations: dict[str, dict[str, int]]  # consumer -> class -> amount


@dataclass
class CloudBooks:
    providers: dict[str, Provider]
    compute_roots: set[str]  # roots with the COMPUTE_NODE trait
    leased: set[str]  # consumers whose allocations are under a claim lease (in flight)
    agents: list[AgentView]
    # The consumer type of each consumer holding allocations on two or more hosts.
    consumer_types: dict[str, str | None] = field(default_factory=dict)

    def consumer_type(self, consumer: str) -> str | None:
        return self.consumer_types.get(consumer)

    def hosts_of(self, held: dict[str, dict[str, int]]) -> list[str]:
        """The names of the hosts whose trees hold ``held`` (sharing providers are nobody's host)."""
        roots = self.host_roots()
        return sorted(
            {roots[self.providers[p].root] for p in held if p in self.providers and self.providers[p].root in roots}
        )

    def holdings(self) -> dict[str, dict[str, dict[str, int]]]:
        """consumer -> provider -> class -> amount, over every provider."""
        held: dict[str, dict[str, dict[str, int]]] = {}
        for provider in self.providers.values():
            for consumer, resources in provider.allocations.items():
                held.setdefault(consumer, {})[provider.uuid] = resources
        return held

    def agent_of(self, provider: str) -> AgentView | None:
        """The agent whose host has ``provider`` in its tree, if one was given."""
        root = self.providers[provider].root if provider in self.providers else provider
        for agent in self.agents:
            if provider in agent.providers or root in agent.providers:
                return agent
        return None

    def maybe_silent(self, provider: str) -> bool:
        """Whether ``provider`` may be the host of an agent that did not answer: a compute host's
        provider no agent that answered has (a silent agent's providers are not known)."""
        if all(a.reachable for a in self.agents):
            return False
        agent = self.agent_of(provider)
        if agent is not None:
            return not agent.reachable
        root = self.providers[provider].root if provider in self.providers else provider
        return root in self.compute_roots

    def host_roots(self) -> dict[str, str]:
        """Root provider uuid -> host name, for every compute host (an agent's or a COMPUTE_NODE root)."""
        hosts = {root: self.providers[root].name for root in self.compute_roots if root in self.providers}
        for agent in self.agents:
            for provider in agent.providers:
                if provider in self.providers and self.providers[provider].root == provider:
                    hosts[provider] = agent.host
        return hosts

    def owned(self) -> set[str]:
        """The consumers someone owns: a guest on an agent, a claim in an agent's books (its
        instance, its consumer and its migration), or a lease (in flight; the service frees it)."""
        owned = set(self.leased)
        for agent in self.agents:
            owned |= agent.guests
            for claim in agent.claims:
                owned |= {claim.instance_uuid, claim.consumer_uuid}
                if claim.migration_uuid:
                    owned.add(claim.migration_uuid)
        return owned

    def moving(self) -> set[str]:
        """The instances with a move in flight: a moving claim of theirs whose migration consumer
        is held by an agent's outgoing claim."""
        held_by_moves = {c.consumer_uuid for a in self.agents for c in a.claims if c.state == OUTGOING}
        return {
            c.instance_uuid
            for a in self.agents
            for c in a.claims
            if c.state in MOVING and c.migration_uuid in held_by_moves
        }

    def claimed_on(self, instance_uuid: str) -> set[str]:
        """The hosts whose agents hold a claim of the instance or run its guest."""
        return {
            a.host
            for a in self.agents
            if instance_uuid in a.guests or any(c.instance_uuid == instance_uuid for c in a.claims)
        }


def read_cloud(placement: PlacementClient, agents: Iterable[AgentClient]) -> CloudBooks:
    listed = placement.get("/resource_providers")["resource_providers"]
    providers = {}
    for p in listed:
        uuid = str(p["uuid"])
        _, inventories = placement.get_inventories(uuid)
        providers[uuid] = Provider(
            uuid, str(p["name"]), str(p["root_provider_uuid"]), inventories, placement.provider_allocations(uuid)
        )
    computes = placement.get("/resource_providers?" + urlencode({"required": COMPUTE_NODE_TRAIT}))
    compute_roots = {str(p["root_provider_uuid"]) for p in computes["resource_providers"]}
    books = CloudBooks(providers, compute_roots, _leased(placement), [read_agent(a) for a in agents])
    for consumer, held in books.holdings().items():
        if len(books.hosts_of(held)) > 1:
            books.consumer_types[consumer] = placement.consumer(consumer).consumer_type
    return books


def _leased(placement: PlacementClient) -> set[str]:
    """Consumers under a lease; a service without Berth's leases has none."""
    try:
        body = placement.get(LEASES_PATH)
    except PlacementError as e:
        if e.status in (404, 405):
            return set()
        raise
    return {str(lease["consumer_uuid"]) for lease in body["leases"]}


def read_agent(client: AgentClient) -> AgentView:
    try:
        host = client.host
        capacity = client.capacity()
        claims = [
            ClaimView(c.claim_id, c.instance_uuid, c.consumer_uuid, c.state, c.migration_uuid)
            for c in client.claims_for_host(host)
        ]
        guests = {str(g["uuid"]) for g in client.guests()}
        report = client.audit(heal=False)
    except (TransportError, ClientError, ValueError) as e:
        return AgentView(client, client.url, error=f"the agent at {client.url} did not answer: {e}")
    providers = set(capacity["providers"]) | {str(capacity["root_provider_uuid"])}
    return AgentView(client, host, providers, claims, guests, list(report["findings"]))
