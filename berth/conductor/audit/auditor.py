"""``audit_cloud``: the cloud's books read and checked; with ``heal``, repaired through the agents
(each holds its host's lock while it repairs, so no claim in progress is mistaken for a leak),
then read and checked again: what is still found needs an operator.

Healing, in order:

1. each agent whose provider is over capacity writes its host's real inventory back
   (``update_available_resource``);
2. each agent named by a finding it can heal runs its own audit with healing, once. An agent
   whose host holds allocations under a lease with no claim yet (a build between the
   scheduler's claim and the agent's) is not asked: its audit would take them for a leak. Its
   findings stay, and the audit says to run it again;
3. everything is read and checked again; a first finding no longer found is ``healed``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from berth.clients.agent import AgentClient
from berth.clients.errors import ClientError
from berth.clients.http import TransportError
from berth.clients.placement import PlacementClient
from berth.conductor.audit.books import AgentView, CloudBooks, read_cloud
from berth.conductor.audit.findings import OVER_CAPACITY, CloudFinding, check

# The agent's finding of allocations no claim on its host accounts for.
_WITHOUT_CLAIM = "allocations_without_claim"


@dataclass
class CloudReport:
    heal: bool
    started_at: float
    findings: list[CloudFinding] = field(default_factory=list)
    # What is still found after healing (without healing: every finding), for an operator.
    residual: list[CloudFinding] = field(default_factory=list)
    # What each agent asked to heal did: host -> the agent's report, or why it was not asked.
    repairs: dict[str, Any] = field(default_factory=dict)

    @property
    def consistent(self) -> bool:
        return not self.residual

    def to_dict(self) -> dict[str, Any]:
        return {
            "heal": self.heal,
            "started_at": self.started_at,
            "consistent": self.consistent,
            "findings": [f.to_dict() for f in self.findings],
            "needs_operator": [f.to_dict() for f in self.residual],
            "repairs": self.repairs,
        }


def audit_cloud(placement: PlacementClient, agents: Iterable[AgentClient], *, heal: bool = False) -> CloudReport:
    clients = list(agents)
    report = CloudReport(heal=heal, started_at=time.time())
    books = read_cloud(placement, clients)
    report.findings = check(books)
    if not heal or not report.findings:
        report.residual = list(report.findings)
        return report
    _heal(books, report)
    report.residual = check(read_cloud(placement, clients))
    still = {f.key() for f in report.residual}
    for finding in report.findings:
        finding.healed = finding.key() not in still
    return report


def _heal(books: CloudBooks, report: CloudReport) -> None:
    by_host = {a.host: a for a in books.agents if a.reachable}
    healable = [f for f in report.findings if f.operator is None or f.healers]
    resync = {h for f in healable if f.kind == OVER_CAPACITY for h in f.healers}
    for host in sorted(resync & set(by_host)):
        report.repairs[host] = {"sync": _ask(lambda a=by_host[host]: a.client.update_available_resource())}
    for host in sorted({h for f in healable if f.kind != OVER_CAPACITY for h in f.healers} & set(by_host)):
        agent = by_host[host]
        in_flight = _leased_without_claim(books, agent)
        if in_flight:
            report.repairs.setdefault(host, {})["audit"] = (
                f"not asked: {', '.join(in_flight)} on {host} is leased with no claim yet (a build in "
                "flight); audit again once it has landed"
            )
            continue
        report.repairs.setdefault(host, {})["audit"] = _ask(lambda a=agent: a.client.audit(heal=True))


def _leased_without_claim(books: CloudBooks, agent: AgentView) -> list[str]:
    return sorted(
        str(f["consumer_uuid"])
        for f in agent.findings
        if f["kind"] == _WITHOUT_CLAIM and f.get("consumer_uuid") in books.leased
    )


def _ask(call: Any) -> Any:
    """The agent's answer, or why there was none (the re-reading then finds what is left)."""
    try:
        return call()
    except (TransportError, ClientError) as e:
        return f"failed: {e}"
