"""``select_destinations``: hosts for the instances of one request, claimed in Placement.

On Placement's own API (any Placement, Berth's or OpenStack's):

1. ask ``GET /allocation_candidates`` with the spec's query; nothing: ``NoValidHost`` with the
   service's count of what each condition excluded, when it can give one;
2. build a state per host (``hosts``): its allocation requests, its providers' capacity and usage,
   its aggregates and traits, and what the filters and weighers need;
3. per instance: filter and weigh the hosts (``sorting``), then claim the best host's allocation
   request (``PUT /allocations/{instance}``, ``consumer_generation`` null); the filters that ask
   the agents check a host only when the walk down the ranking reaches it. When the agent was
   asked, the request that gives what the agent's claim will take goes first. A 409 moves on to
   the next host, and that request is never tried again in the call. The host placed on then
   counts the instance (``HostState.consume``) before the next one is placed;
4. per instance, up to ``alternates`` other hosts that pass the filters, each with an allocation
   request that fits, unclaimed: a conductor claims one of those itself when the build fails.

If one instance finds no host, the instances claimed before it are kept when they are at least
``min_count`` (the others are left out of the answer, nothing claimed for them); otherwise they
are released and ``NoValidHost`` says what removed the hosts. When the service offers its
pick-and-claim and nothing of the request needs the scheduler's side (``picking.pick_suits``),
step 3 is one ``POST /berth/pick`` instead: for one instance, a pick whose answer names the
alternates (the service names the next trees of its own weighing; no candidates query is made);
for several, one gang pick placing all of them, at least ``min_count`` or none, in one write
(docs/pick-and-claim.md, "Gangs"), whose members have no alternates (a gang names none).

``lease_seconds``: each instance's claim under a lease of its own (docs/leases.md), taken before
its allocations are written (by the pick itself on the pick's path), so that a caller that dies
before confirming leaks nothing; an instance released is released with its lease.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence

from berth.clients.agent import AgentClient
from berth.clients.errors import PlacementError
from berth.clients.placement import PlacementClient
from berth.domain.host.allocations import Allocations
from berth.domain.host.fitting import Plan
from berth.scheduler.errors import SpecError
from berth.scheduler.explain import NoValidHost, describe_explain, nothing_left, nothing_offered
from berth.scheduler.filters import enabled_filters
from berth.scheduler.filters.compute import ComputeFilter
from berth.scheduler.hosts.build import HostReads, build_hosts, member_hosts, place_group
from berth.scheduler.hosts.candidates import AllocationRequest, Candidates
from berth.scheduler.hosts.host_state import HostState
from berth.scheduler.hosts.ranked import RankedHosts
from berth.scheduler.hosts.snapshots import AgentSnapshots, SnapshotSource
from berth.scheduler.hosts.sorting import sorted_hosts
from berth.scheduler.picking import alternates_of, breaks_group, gang_body, pick_body, pick_suits, victims_of
from berth.scheduler.request.build_request import BuildRequest
from berth.scheduler.request.flavor import SchedulerConfig
from berth.scheduler.request.request_spec import RequestSpec
from berth.scheduler.request.server_group import ServerGroup
from berth.scheduler.selection import Destination, Selection, Victim
from berth.scheduler.service import PICK_PATH, Service, detail_of
from berth.scheduler.settings import SelectionSettings
from berth.scheduler.weighers import counts_instances, enabled_weighers


class Selector:
    def __init__(
        self,
        placement: PlacementClient,
        *,
        config: SchedulerConfig,
        settings: SelectionSettings | None = None,
        agents: Mapping[str, AgentClient] | None = None,
        rng: random.Random | None = None,
    ):
        self.service = Service(placement)
        self.config = config
        self.settings = settings or SelectionSettings()
        # Kept as given, not copied: a conductor's agents are those registered at each look, hosts
        # that register after it started included.
        self.agents: Mapping[str, AgentClient] = agents if agents is not None else {}
        self.rng = rng or random.Random()
        self.filters = enabled_filters(self.settings, config)
        self.weighers = enabled_weighers(self.settings)
        # The path the last call took: "pick" or "placement".
        self.last_path = ""

    def select_destinations(
        self,
        spec: RequestSpec,
        num_instances: int,
        alternates: int = 2,
        *,
        server_group: ServerGroup | None = None,
        instance_uuids: Sequence[str],
        min_count: int | None = None,
        lease_seconds: int | None = None,
        ignore_hosts: Collection[str] = (),
        moving_instance: str | None = None,
    ) -> list[Selection]:
        """A claimed host and up to ``alternates`` unclaimed ones for each instance placed, in order:
        every instance, or (``min_count`` below ``num_instances``) at least ``min_count`` of them,
        those left out having nothing claimed; fewer raise ``NoValidHost`` with nothing claimed.
        The hosts named in ``ignore_hosts`` are neither chosen nor named as alternates. A move's
        consumer is its migration; ``moving_instance`` names its instance in the refusals."""
        _check_arguments(num_instances, alternates, instance_uuids, min_count)
        request = BuildRequest(
            spec, server_group, ignore_hosts=frozenset(ignore_hosts), moving_instance=moving_instance
        )
        if self._pick_applies(request):
            if num_instances > 1:
                placed = self._gang(request, instance_uuids, min_count, lease_seconds)
                if placed is not None:
                    self.last_path = "pick"
                    return placed
            else:
                picked = self._pick(request, instance_uuids, alternates, lease_seconds)
                if picked is not None:
                    self.last_path = "pick"
                    claimed, others, victims = picked
                    return [
                        Selection(instance, destination, tuple(others), preempted=removed)
                        for instance, destination, removed in zip(instance_uuids, claimed, victims, strict=True)
                    ]
        self.last_path = "placement"
        return self._claim(request, instance_uuids, alternates, min_count or len(instance_uuids), lease_seconds)

    # -- the Placement API's path -----------------------------------------------------------------

    def _claim(
        self,
        request: BuildRequest,
        instance_uuids: Sequence[str],
        alternates: int,
        min_count: int,
        lease_seconds: int | None,
    ) -> list[Selection]:
        query = request.spec.candidates_query()
        candidates = self.service.candidates(query)
        if not candidates.requests:
            raise nothing_offered(self.service.explain(query))
        hosts = self._hosts(request, candidates, AgentSnapshots(self.agents))
        claimed: list[Destination] = []
        ranked: RankedHosts | None = None
        try:
            for index, instance in enumerate(instance_uuids):
                position = f"{index + 1} of {len(instance_uuids)}"
                if lease_seconds is not None:
                    self.service.lease(instance, lease_seconds)
                try:
                    destination, ranked = self._claim_one(request, hosts, instance, position)
                    claimed.append(destination)
                except NoValidHost:
                    if len(claimed) < min_count:
                        raise
                    self._release([instance], lease_seconds is not None)
                    break
            placed = instance_uuids[: len(claimed)]
            # One claim changed one host, which alternates leave out: its order serves them as it
            # is, as Nova sorts again only after several instances' claims.
            reusable = ranked if len(claimed) == 1 and len(instance_uuids) == 1 else None
            return self._with_alternates(request, claimed, placed, alternates, hosts, reusable)
        except BaseException:
            # The instance being claimed for holds a lease already when one was taken.
            leased = lease_seconds is not None
            self._release(instance_uuids[: len(claimed) + leased], leased)
            raise

    def _hosts(self, request: BuildRequest, candidates: Candidates, snapshots: SnapshotSource) -> list[HostState]:
        reads = HostReads(
            aggregates=self._aggregates_read(request), instances=counts_instances(self.weighers, self.settings)
        )
        hosts = [
            h
            for h in build_hosts(candidates, self.service, snapshots, reads)
            if h.name not in request.ignore_hosts and h.name not in self.config.unknown_hosts
        ]
        if request.group is not None:
            request.group_hosts = place_group(request.group, hosts, candidates, self.service)
        return hosts

    def _aggregates_read(self, request: BuildRequest) -> frozenset[str]:
        """The aggregates whose members a filter or a weigher of this request reads."""
        wanted = frozenset[str]().union(*(f.aggregates_read() for f in self.filters if f.applies(request)))
        weighing = {
            aggregate
            for aggregate, metadata in self.settings.aggregate_metadata.items()
            if any(key.endswith("_weight_multiplier") for key in metadata)
        }
        return wanted | weighing

    def _claim_one(
        self, request: BuildRequest, hosts: list[HostState], instance: str, position: str
    ) -> tuple[Destination, RankedHosts]:
        """The destination claimed for the instance, and the hosts in the order it was chosen from."""
        request.instance_uuid = instance
        ranked = self._sorted(hosts, request)
        refused = []
        for host in ranked:
            plan = self._plan(host, request)
            allocation_request = next(iter(_preferred(host, plan)), None)
            if allocation_request is None:
                continue
            refusal = self.service.claim(
                instance, allocation_request, project_id=request.spec.project_id, user_id=request.spec.user_id
            )
            if refusal is not None:
                host.forget(allocation_request)
                refused.append(host.name)
                continue
            host.consume(allocation_request, instance, plan, member=request.group is not None)
            if request.group is not None:
                request.group_hosts.add(host.uuid)
            return Destination(host.name, host.uuid, allocation_request), ranked
        outcome = "every claim was refused" if ranked.found else "no host is left"
        raise nothing_left(request.consumer_name(instance), position, ranked.run.hosts, ranked.run, refused, outcome)

    def _sorted(self, hosts: list[HostState], request: BuildRequest) -> RankedHosts:
        return sorted_hosts(hosts, request, self.filters, self.weighers, self.settings, self.rng)

    def _plan(self, host: HostState, request: BuildRequest) -> Plan | None:
        """What the agent's claim will take, when a filter asked the agent already."""
        if not any(f.needs_agent and f.applies(request) for f in self.filters):
            return None
        fitted = host.fit(request.spec.host_request)
        return fitted if isinstance(fitted, Plan) else None

    def _release(self, instance_uuids: Sequence[str], leased: bool = False) -> None:
        """The instances' allocations gone, and their leases when the call took some."""
        for instance in instance_uuids:
            if leased:
                self.service.release_lease(instance)
            self.service.release(instance)

    # -- alternates ---------------------------------------------------------------------------------

    def _with_alternates(
        self,
        request: BuildRequest,
        claimed: list[Destination],
        instance_uuids: Sequence[str],
        alternates: int,
        hosts: list[HostState],
        ranked: RankedHosts | None = None,
    ) -> list[Selection]:
        """The claims with up to ``alternates`` other hosts each, from ``ranked`` when given, else
        from the hosts sorted again."""
        others: list[Destination] = []
        if alternates and hosts:
            request.instance_uuid = None
            chosen = {d.root_provider_uuid for d in claimed}
            # Walked only until there are enough: each host reached may cost its agent's snapshot.
            for host in ranked if ranked is not None else self._sorted(hosts, request):
                allocation_request = next(iter(_preferred(host, self._plan(host, request))), None)
                if host.uuid not in chosen and allocation_request is not None:
                    others.append(Destination(host.name, host.uuid, allocation_request))
                    if len(others) == alternates:
                        break
        return [
            Selection(instance, destination, tuple(others))
            for instance, destination in zip(instance_uuids, claimed, strict=True)
        ]

    # -- the service's pick-and-claim -----------------------------------------------------------------

    def _pick_applies(self, request: BuildRequest) -> bool:
        return (
            self.settings.use_pick_extension
            and pick_suits(request, self.filters, self.settings)
            and PICK_PATH in self.service.extensions()
        )

    def _avoided(self, request: BuildRequest) -> list[str]:
        """The root providers for the pick to avoid: those of the hosts the request ignores, of the
        compute nodes no agent registered for, and of the hosts down, as ComputeFilter would leave
        them out (only while it is enabled)."""
        avoid = set(request.ignore_hosts) | set(self.config.unknown_hosts)
        if any(f.name == ComputeFilter.name for f in self.filters):
            avoid.update(self.config.hosts_down)
        return self.service.host_roots(avoid) if avoid else []

    def _pick(
        self, request: BuildRequest, instance_uuids: Sequence[str], alternates: int, lease_seconds: int | None
    ) -> tuple[list[Destination], list[Destination], list[tuple[Victim, ...]]] | None:
        """A pick per instance, and up to ``alternates`` other hosts named by the last one, and the
        consumers each pick removed to make room (a pick of a priority above 0 may preempt); None
        when the Placement path must do it after all: the service turns out not to have the route,
        or a pick breaks the server group's policy."""
        group = request.group
        members_on = member_hosts(group.members - set(instance_uuids), self.service, {}) if group else {}
        picked: list[tuple[str, AllocationRequest]] = []
        victims: list[tuple[Victim, ...]] = []
        offered: list[tuple[str, AllocationRequest]] = []
        # The last pick's alternates may name the hosts of the earlier instances: asked for that many more.
        wanted = alternates + len(instance_uuids) - 1 if alternates else 0
        avoid = self._avoided(request)
        try:
            for index, instance in enumerate(instance_uuids):
                last = index == len(instance_uuids) - 1
                body = pick_body(
                    request,
                    instance,
                    self.filters,
                    self.weighers,
                    self.settings,
                    alternates=wanted if last else 0,
                    lease_seconds=lease_seconds,
                    avoid=avoid,
                )
                answer = self.service.pick(body)
                if isinstance(answer, PlacementError):
                    raise self._pick_refused(request, instance, f"{index + 1} of {len(instance_uuids)}", answer)
                root = str(answer["root_provider_uuid"])
                picked.append((root, AllocationRequest.from_dict(answer["allocation_request"])))
                victims.append(victims_of(answer))
                if breaks_group(request, members_on, root):
                    self._release(instance_uuids[: len(picked)], lease_seconds is not None)
                    return None
                members_on.setdefault(root, set()).add(instance)
                if last:
                    offered = alternates_of(answer)
            chosen = {root for root, _ in picked}
            # The service counts only the members it placed itself; the others are checked here.
            kept = [(r, a) for r, a in offered if r not in chosen and not breaks_group(request, members_on, r)]
            kept = kept[:alternates]
            names = self.service.host_names(chosen | {root for root, _ in kept})
        except PlacementError as e:
            self._release(instance_uuids[: len(picked)], lease_seconds is not None)
            if e.status == 404 and not picked:
                return None
            raise
        except BaseException:
            self._release(instance_uuids[: len(picked)], lease_seconds is not None)
            raise
        return (
            [Destination(names[root], root, chosen_request) for root, chosen_request in picked],
            [Destination(names[root], root, alternate) for root, alternate in kept],
            victims,
        )

    def _gang(
        self, request: BuildRequest, instance_uuids: Sequence[str], min_count: int | None, lease_seconds: int | None
    ) -> list[Selection] | None:
        """One gang pick placing the instances (at least ``min_count`` of them); the members map to
        the instances in order, those the service left out have nothing claimed. None when the
        Placement path must do it after all: the service turns out not to have the route, or a
        member breaks the server group's policy as the members' allocations show it."""
        group = request.group
        body = gang_body(
            request,
            instance_uuids,
            self.filters,
            self.weighers,
            self.settings,
            min_count=min_count,
            lease_seconds=lease_seconds,
            avoid=self._avoided(request),
        )
        try:
            answer = self.service.pick(body)
        except PlacementError as e:
            if e.status == 404:
                return None
            raise
        if isinstance(answer, PlacementError):
            raise self._gang_refused(request, instance_uuids, min_count, answer)
        by_consumer = {str(m["consumer_uuid"]): m for m in answer["members"]}
        placed = [instance for instance in instance_uuids if instance in by_consumer]
        try:
            members_on = member_hosts(group.members - set(instance_uuids), self.service, {}) if group else {}
            roots: list[tuple[str, str]] = []
            for instance in placed:
                root = str(by_consumer[instance]["root_provider_uuid"])
                if breaks_group(request, members_on, root):
                    self._release(placed, lease_seconds is not None)
                    return None
                members_on.setdefault(root, set()).add(instance)
                roots.append((instance, root))
            names = self.service.host_names({root for _, root in roots})
        except BaseException:
            self._release(placed, lease_seconds is not None)
            raise
        # The consumers removed for the gang, by the tree they were removed from: every member placed
        # there names them (its host's claim drops theirs first, whichever member claims first).
        removed: dict[str, list[Victim]] = {}
        for victim in victims_of(answer):
            removed.setdefault(victim.root_provider_uuid, []).append(victim)
        return [
            Selection(
                instance,
                Destination(
                    names[root], root, AllocationRequest.from_dict(by_consumer[instance]["allocation_request"])
                ),
                preempted=tuple(removed.get(root, ())),
            )
            for instance, root in roots
        ]

    def _gang_refused(
        self, request: BuildRequest, instance_uuids: Sequence[str], min_count: int | None, refusal: PlacementError
    ) -> NoValidHost:
        asked = len(instance_uuids)
        least = f"at least {min_count} of {asked}" if min_count is not None and min_count < asked else f"all {asked}"
        why = detail_of(refusal).removeprefix("No valid host: ")
        message = f"No valid host for {least} instances: the service's gang pick placed none: {why}"
        report = self.service.explain(request.spec.candidates_query())
        if report is not None and not report.get("candidates"):
            message += f"; the service's count: {describe_explain(report)}"
        return NoValidHost(message, candidates=int((report or {}).get("candidates") or 0), explain=report)

    def _pick_refused(
        self, request: BuildRequest, instance: str, position: str, refusal: PlacementError
    ) -> NoValidHost:
        why = detail_of(refusal).removeprefix("No valid host: ")
        message = (
            f"No valid host for {request.consumer_name(instance)} ({position}): the service's pick found none: {why}"
        )
        report = self.service.explain(request.spec.candidates_query())
        if report is not None and not report.get("candidates"):
            message += f"; the service's count: {describe_explain(report)}"
        return NoValidHost(message, candidates=int((report or {}).get("candidates") or 0), explain=report)


def _preferred(host: HostState, plan: Plan | None) -> list[AllocationRequest]:
    """The host's requests that still fit; the one the agent's claim will take first."""
    open_requests = list(host.open_requests())
    if plan is None:
        return open_requests
    claim: Allocations = {**plan.allocations, **plan.shared}
    return sorted(open_requests, key=lambda r: not r.same_allocations(claim))


def _check_arguments(num_instances: int, alternates: int, instance_uuids: Sequence[str], min_count: int | None) -> None:
    if num_instances < 1:
        raise SpecError("num_instances", f"{num_instances} is less than 1")
    if len(instance_uuids) != num_instances:
        raise SpecError("instance_uuids", f"{len(instance_uuids)} given for {num_instances} instances")
    if len(set(instance_uuids)) != len(instance_uuids):
        raise SpecError("instance_uuids", "an instance is named twice")
    if alternates < 0:
        raise SpecError("alternates", f"{alternates} is less than 0")
    if min_count is not None and not 1 <= min_count <= num_instances:
        raise SpecError("min_count", f"{min_count} is not between 1 and {num_instances}")
