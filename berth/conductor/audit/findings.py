"""What the cloud audit finds, and the checks that find it in the books (``books.CloudBooks``).

- ``stray_allocations``: a consumer holds allocations and nobody owns it: no agent runs its guest
  or has a claim of it (as its instance, consumer or migration), and no lease covers it. Healed by
  the agent of each host holding them (its audit removes allocations without a claim); on a
  provider no agent answers for, an operator decides.
- ``instance_on_two_hosts``: a consumer of type INSTANCE holds allocations on two or more hosts
  with no move in flight. Healed by the agents of the hosts that hold no claim and run no guest of
  it, when at least one host does; otherwise an operator decides which host it belongs on.
- ``over_capacity``: a provider's usage is above its capacity (``berth.domain.capacity``), as
  Placement allows after an inventory shrinks. Healed when the provider is an agent's, by the
  agent writing its host's real inventory back; still over after that (the host really shrank),
  an operator moves instances away.
- ``claims_disagree``: an agent's own audit says its claims, its guests and the service disagree
  (``agent_kind`` is the tracker's finding: berth.tracker.auditing.audit). Healed by that agent's audit;
  what it cannot heal (a guest whose allocations are gone) needs an operator. An agent's
  ``allocations_without_claim`` of a consumer found above is that finding, not another; its
  ``usage_mismatch`` is the symptom of its other findings and is reported only alone.
- ``agent_unreachable``: an agent did not answer; its host is not judged (an operator looks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from berth.conductor.audit.books import AgentView, CloudBooks
from berth.domain.capacity import INVENTORY_DEFAULTS, capacity

STRAY_ALLOCATIONS: Final = "stray_allocations"
INSTANCE_ON_TWO_HOSTS: Final = "instance_on_two_hosts"
OVER_CAPACITY: Final = "over_capacity"
CLAIMS_DISAGREE: Final = "claims_disagree"
AGENT_UNREACHABLE: Final = "agent_unreachable"
KINDS: Final = (STRAY_ALLOCATIONS, INSTANCE_ON_TWO_HOSTS, OVER_CAPACITY, CLAIMS_DISAGREE, AGENT_UNREACHABLE)

# The tracker's findings the cloud's own checks already say.
_AGENT_ALLOCATIONS_WITHOUT_CLAIM: Final = "allocations_without_claim"
_AGENT_USAGE_MISMATCH: Final = "usage_mismatch"


@dataclass
class CloudFinding:
    kind: str
    detail: str
    consumer_uuid: str | None = None
    provider_uuid: str | None = None
    resource_class: str | None = None
    agent_kind: str | None = None  # claims_disagree: the agent's own finding
    hosts: list[str] = field(default_factory=list)  # the hosts it concerns
    healers: list[str] = field(default_factory=list)  # the hosts whose agents can repair it
    operator: str | None = None  # why it needs an operator (None: the agents can heal it)
    healed: bool = False

    def key(self) -> tuple[str | None, ...]:
        """What makes a finding of a later reading the same finding."""
        return (self.kind, self.consumer_uuid, self.provider_uuid, self.resource_class, self.agent_kind)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None and v != []}


def check(books: CloudBooks) -> list[CloudFinding]:
    findings = _stray(books) + _on_two_hosts(books) + _over_capacity(books)
    findings += _agents_disagree(books, findings) + _unreachable(books)
    return findings


def _stray(books: CloudBooks) -> list[CloudFinding]:
    owned = books.owned()
    findings = []
    for consumer, held in sorted(books.holdings().items()):
        if consumer in owned:
            continue
        agents = {p: books.agent_of(p) for p in held}
        if any(books.maybe_silent(p) for p in held):
            continue  # an agent that did not answer might own it: its host is not judged
        orphaned = sorted(p for p, a in agents.items() if a is None)
        healers = sorted({a.host for a in agents.values() if a is not None})
        findings.append(
            CloudFinding(
                STRAY_ALLOCATIONS,
                f"consumer {consumer} holds {_describe(books, held)} and no guest, claim or lease owns it",
                consumer_uuid=consumer,
                hosts=healers,
                healers=healers,
                operator=f"no agent answers for {', '.join(_names(books, orphaned))}" if orphaned else None,
            )
        )
    return findings


def _on_two_hosts(books: CloudBooks) -> list[CloudFinding]:
    moving = books.moving()
    by_name = {a.host: a for a in books.agents}
    findings = []
    for consumer, held in sorted(books.holdings().items()):
        hosts = books.hosts_of(held)
        if len(hosts) < 2 or consumer in moving:
            continue
        if books.consumer_type(consumer) != "INSTANCE":
            continue
        owners = books.claimed_on(consumer)
        others = [h for h in hosts if h not in owners]
        finding = CloudFinding(
            INSTANCE_ON_TWO_HOSTS,
            f"instance {consumer} holds allocations on {', '.join(hosts)} with no move in flight"
            + (f"; its claim or guest is on {', '.join(sorted(owners))}" if owners else "; no agent has it"),
            consumer_uuid=consumer,
            hosts=hosts,
            healers=others,
        )
        if not owners:
            finding.operator = "no host has its claim or guest: decide where it belongs"
        elif any(h not in by_name or not by_name[h].reachable for h in others):
            finding.operator = "a host holding it without a claim has no agent that answers"
        findings.append(finding)
    return findings


def _over_capacity(books: CloudBooks) -> list[CloudFinding]:
    findings = []
    for provider in sorted(books.providers.values(), key=lambda p: p.name):
        for rc, inventory in sorted(provider.inventories.items()):
            fields = {**INVENTORY_DEFAULTS, **inventory}
            room = capacity(int(fields["total"]), int(fields["reserved"]), float(fields["allocation_ratio"]))
            used = sum(resources.get(rc, 0) for resources in provider.allocations.values())
            if used <= room:
                continue
            agent = books.agent_of(provider.uuid)
            healer = [agent.host] if agent is not None and agent.reachable else []
            findings.append(
                CloudFinding(
                    OVER_CAPACITY,
                    f"{provider.name}: {used} {rc} used of a capacity of {room}",
                    provider_uuid=provider.uuid,
                    resource_class=rc,
                    hosts=healer,
                    healers=healer,
                    operator=None if healer else "no agent reports this provider's inventory: move consumers away",
                )
            )
    return findings


def _agents_disagree(books: CloudBooks, found: list[CloudFinding]) -> list[CloudFinding]:
    # Leased consumers are builds in flight, between the scheduler's claim and the agent's.
    covered = {f.consumer_uuid for f in found if f.consumer_uuid} | books.leased
    findings = []
    for agent in books.agents:
        causes = [f for f in agent.findings if f["kind"] != _AGENT_USAGE_MISMATCH]
        own = causes if causes or any(agent.host in f.hosts for f in found) else agent.findings
        findings += [
            _disagreement(agent, f)
            for f in own
            if not (f["kind"] == _AGENT_ALLOCATIONS_WITHOUT_CLAIM and f.get("consumer_uuid") in covered)
        ]
    return findings


def _disagreement(agent: AgentView, finding: dict[str, Any]) -> CloudFinding:
    return CloudFinding(
        CLAIMS_DISAGREE,
        f"{agent.host}: {finding['detail']}",
        consumer_uuid=finding.get("consumer_uuid") or finding.get("instance_uuid"),
        provider_uuid=finding.get("provider_uuid"),
        agent_kind=str(finding["kind"]),
        hosts=[agent.host],
        healers=[agent.host],
    )


def _unreachable(books: CloudBooks) -> list[CloudFinding]:
    return [
        CloudFinding(AGENT_UNREACHABLE, str(a.error), hosts=[a.host], operator="its host is not audited")
        for a in books.agents
        if not a.reachable
    ]


def _names(books: CloudBooks, providers: list[str]) -> list[str]:
    return [books.providers[p].name if p in books.providers else p for p in providers]


def _describe(books: CloudBooks, held: dict[str, dict[str, int]]) -> str:
    parts = []
    for provider in sorted(held, key=lambda p: _names(books, [p])[0]):
        amounts = ",".join(f"{rc}:{n}" for rc, n in sorted(held[provider].items()))
        parts.append(f"{amounts} on {_names(books, [provider])[0]}")
    return "; ".join(parts)
