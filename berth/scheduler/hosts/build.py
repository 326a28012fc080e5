"""The host states of one scheduling call, from the candidates answer and a few cheap reads.

What each read costs, and when it is made:

- names of the hosts: one list of the compute nodes (``required=COMPUTE_NODE``), a read per root
  that is not one;
- aggregates: one ``member_of`` list per aggregate the configuration names (zones, aggregate
  metadata), only when there is one; Placement's aggregates have no metadata, so no other
  aggregate could matter;
- instances on each host: one read per host, only when a weigher counts them;
- where a server group's members are: one read per member (their allocations), only with a group.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from berth.scheduler.hosts.books import ProviderBooks
from berth.scheduler.hosts.candidates import Candidates, ProviderSummary
from berth.scheduler.hosts.host_state import HostState
from berth.scheduler.hosts.snapshots import SnapshotSource
from berth.scheduler.request.server_group import ServerGroup
from berth.scheduler.service import Service


@dataclass(frozen=True)
class HostReads:
    """What the call's filters and weighers need beyond the candidates answer."""

    aggregates: frozenset[str] = frozenset()
    instances: bool = False


def build_hosts(
    candidates: Candidates, service: Service, snapshots: SnapshotSource, reads: HostReads
) -> list[HostState]:
    """A state per host of the answer, in the answer's order."""
    by_host = candidates.by_host()
    names = service.host_names(by_host) if by_host else {}
    members = {aggregate: service.members_of(aggregate) for aggregate in sorted(reads.aggregates)} if by_host else {}
    books = ProviderBooks(candidates.summaries)
    hosts = []
    for root, requests in by_host.items():
        summary = candidates.summaries[root]
        hosts.append(
            HostState(
                uuid=root,
                name=names.get(root, root),
                requests=list(requests),
                tree=tuple(s.uuid for s in candidates.tree(root)),
                traits=summary.traits,
                aggregates=frozenset(a for a, providers in members.items() if root in providers),
                books=books,
                snapshots=snapshots,
                instances=service.consumers_on(root) if reads.instances else None,
            )
        )
    return hosts


def member_hosts(
    members: Iterable[str], service: Service, summaries: Mapping[str, ProviderSummary]
) -> dict[str, set[str]]:
    """The root provider of each host holding members, with the members it holds (shared storage
    is no host)."""
    roots_of_provider: dict[str, str | None] = {}
    hosts: dict[str, set[str]] = {}
    for member in sorted(members):
        for provider in service.providers_of(member):
            if provider not in roots_of_provider:
                summary = summaries.get(provider)
                if summary is not None:
                    roots_of_provider[provider] = None if summary.shares else summary.root_uuid
                else:
                    roots_of_provider[provider] = service.root_of(provider)
            root = roots_of_provider[provider]
            if root is not None:
                hosts.setdefault(root, set()).add(member)
    return hosts


def place_group(group: ServerGroup, hosts: Collection[HostState], candidates: Candidates, service: Service) -> set[str]:
    """Record on each host the group's members it holds; the roots of every host holding one,
    candidates or not."""
    found = member_hosts(group.members, service, candidates.summaries)
    for host in hosts:
        host.group_members |= found.get(host.uuid, set())
    return set(found)
