"""Build: a new server placed, claimed on its host and started.

    schedule (and lease) ─▶ claim ─▶ spawn ─▶ confirm ─▶ done
                          │  ▲      │
           refused ◀──────┘  │      └──▶ failed: destroy, abort the claim
              │              │
              └──▶ alternate: lease again, write its allocation request ─┘ (up to max_attempts hosts)

A build whose flavor's priority is above 0 may have its pick preempt (``operations.preemption``):
the victims are journaled with the destinations, named in the host's claim (the agent drops their
claims first), and their servers ended once the claim is made, before the guest starts.

The lease is taken with the scheduler's claim (in the same transaction on the service's pick,
just before it on Placement's path; a gang's member's was taken by the gang's pick and is moved
on in a ``lease`` step), so a conductor that dies before ``confirm``
leaks no allocation even if no other conductor resumes it: the service releases them when the
lease expires. The agent's claim and guest, once made, wait for resume(), which undoes a build
whose guest had not started or whose lease expired, and confirms the others. Every host tried
and why it refused is in the journal's ``attempts``; when none is left the build ends ``failed``
with ``NoValidHost`` naming them all.

A build of a multi-create comes with its destination (``destination`` in its journaled request):
the scheduler placed the whole gang, each member claimed under a lease, before any build was
journaled. Its ``schedule`` step records that destination instead of selecting (and writes its
allocation request again if the lease expired meanwhile); it has no alternates, so when its host
refuses, the ``reschedule`` step gives the allocations back and selects again, while attempts are
left. A resumed one is finished or undone as any build (its allocations are its lease's).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from berth.clients.errors import ClaimError, ClientError
from berth.clients.http import NotConnected, TransportError
from berth.conductor.errors import NoValidHost, UnknownHost
from berth.conductor.journal import DONE, FAILED, ROLLED_BACK, Operation
from berth.conductor.operations import preemption
from berth.conductor.operations.host_leftovers import CLEANUP
from berth.conductor.requests import ServerRequest, destination_from_dict, destination_to_dict, destinations_of
from berth.conductor.runner import Runner
from berth.conductor.service import LeaseExpired
from berth.domain.host.records import SHELVED
from berth.scheduler.explain import NoValidHost as SchedulerNoValidHost
from berth.scheduler.selection import Destination, Victim

LOG = logging.getLogger(__name__)

KIND = "build"
# Unshelving an offloaded instance: a build whose agent's claim is the unshelve claim.
UNSHELVE = "unshelve"
# The steps after which a resumed build is finished rather than undone: the guest runs.
FINISHING_STEPS = ("spawn", "confirm")


# The journaled request's key holding the destination a build of a gang was placed on.
DESTINATION = "destination"
# The selection listing the consumers the build's pick removed to make room (operations.preemption).
PREEMPTED = "preempted"


def build(
    runner: Runner,
    request: ServerRequest,
    kind: str = KIND,
    *,
    destination: Destination | None = None,
    preempted: Sequence[Victim] = (),
) -> Operation:
    """``destination``: the host the scheduler claimed the instance on already (under a lease), as a
    multi-create's gang placed it, and ``preempted`` the consumers the gang's pick removed from that
    host's tree; None: the build selects its host itself."""
    asked = request.to_dict()
    if destination is not None:
        asked[DESTINATION] = destination_to_dict(destination)
        if preempted:
            asked[PREEMPTED] = preemption.victims_to_dicts(tuple(preempted))
    operation = runner.start(kind, request.instance_uuid, asked)
    try:
        _build(runner, operation, request)
    except Exception as e:
        runner.fail(operation, e, lambda: _undo(runner, operation))
        raise
    return runner.end(operation, DONE)


def unshelve(runner: Runner, request: ServerRequest) -> Operation:
    """A shelved instance still on its host is active there again (one step); an offloaded one is
    built anew, its agent's claim being the unshelve claim."""
    host = runner.calls.host_of(request.instance_uuid)
    if host is None:
        return build(runner, request, UNSHELVE)
    operation = runner.start(UNSHELVE, request.instance_uuid, {**request.to_dict(), "on_host": host})
    try:
        _unshelve_on_host(runner, operation, request)
    except Exception as e:
        runner.end(operation, FAILED, str(e))
        raise
    return runner.end(operation, DONE)


def _unshelve_on_host(runner: Runner, operation: Operation, request: ServerRequest) -> None:
    """The shelved claim active again; a claim already active (a repeat) is left as it is."""
    host = str(operation.request["on_host"])
    agent = runner.agent(host)
    runner.reach(operation, "confirm")
    claims = agent.claims_for_instance(request.instance_uuid)
    if any(c.state == SHELVED for c in claims):
        claim = agent.unshelve_claim(request.instance(runner.scheduler_config))
        runner.done(operation, "confirm", write=False, host=host, claim_id=claim.claim_id)
    else:
        runner.done(operation, "confirm", write=False, host=host, claim_id=claims[0].claim_id if claims else None)


def _build(runner: Runner, operation: Operation, request: ServerRequest) -> None:
    instance = request.instance_uuid
    if operation.request.get(DESTINATION) is not None:
        # A gang's member: its lease, taken with the gang's pick, moved on. A build that selects
        # has its lease taken by the scheduler's claim itself (``_select``). Neither the lease's
        # record nor the claim's changes what a resume does (it undoes the build until the guest
        # has started); the confirmation's is written with the end.
        runner.run(
            operation, "lease", lambda: runner.calls.take_lease(instance, runner.config.lease_seconds), write=False
        )
    runner.reach(operation, "schedule")
    _schedule(runner, operation, request)
    _land(runner, operation, request)
    runner.run(operation, "confirm", lambda: runner.calls.confirm_lease(instance), write=False)


def _schedule(runner: Runner, operation: Operation, request: ServerRequest) -> None:
    given = operation.request.get(DESTINATION)
    if given is not None:
        _placed(runner, operation, request, given)
        return
    destinations = _select(runner, operation, request, 0, lease_seconds=runner.config.lease_seconds)
    runner.done(operation, "schedule", destinations=destinations, index=0)


def _select(
    runner: Runner, operation: Operation, request: ServerRequest, tried: int, *, lease_seconds: int | None = None
) -> list[dict[str, Any]]:
    """The scheduler's claimed destination, then its alternates (as many as attempts are left);
    with ``lease_seconds``, the claim under a new lease the scheduler takes with it (in the pick's
    own transaction on the service's path, before the claim on Placement's), which a refusal
    leaves untaken."""
    spec = request.spec(runner.scheduler_config)
    try:
        selections = runner.selector.select_destinations(
            spec,
            1,
            alternates=runner.config.max_attempts - 1 - tried,
            server_group=request.server_group,
            instance_uuids=[request.instance_uuid],
            lease_seconds=lease_seconds,
        )
    except SchedulerNoValidHost as e:
        operation.attempts.append({"host": None, "reason": str(e)})
        raise NoValidHost(request.instance_uuid, operation.attempts, e.candidates) from e
    if selections[0].preempted:
        # Journaled with the destinations by the step that follows (a crash before leaves them to
        # the housekeeping, which reads the service's record).
        operation.selections.setdefault(PREEMPTED, []).extend(preemption.victims_to_dicts(selections[0].preempted))
    return destinations_of(selections[0])


def _placed(runner: Runner, operation: Operation, request: ServerRequest, given: dict[str, Any]) -> None:
    """The gang's destination recorded as the build's; its allocation request written again when
    the lease expired and the service released it, or another host selected if it no longer fits."""
    if not runner.calls.allocations(request.instance_uuid):
        destination = destination_from_dict(given)
        refused = runner.calls.write(
            request.instance_uuid,
            destination.allocation_request,
            project_id=request.project_id,
            user_id=request.user_id,
        )
        if refused is not None:
            operation.attempts.append({"host": destination.host, "reason": f"the service refused the claim: {refused}"})
            runner.done(operation, "schedule", destinations=_select(runner, operation, request, 1), index=0)
            return
    victims = operation.request.get(PREEMPTED)
    if victims:
        # Named in this host's claim and ended before the guest starts, as a build's own pick's.
        operation.selections.setdefault(PREEMPTED, []).extend(victims)
    runner.done(operation, "schedule", destinations=[given], index=0)


def _land(runner: Runner, operation: Operation, request: ServerRequest) -> None:
    """The claimed destination, then each alternate in turn, until one claims and starts the guest."""
    destinations: list[dict[str, Any]] = operation.selections["destinations"]
    index = int(operation.selections["index"])
    while True:
        reason = _try_host(runner, operation, request, destinations[index])
        if reason is None:
            return
        operation.attempts.append({"host": destinations[index]["host"], "reason": reason})
        runner.journal.save(operation)
        LOG.info("build of %s: %s refused (%s)", request.instance_uuid, destinations[index]["host"], reason)
        index = _next_alternate(runner, operation, request, destinations, index + 1)


def _next_alternate(
    runner: Runner, operation: Operation, request: ServerRequest, destinations: list[dict[str, Any]], index: int
) -> int:
    """The index of the next alternate whose allocation request the service took."""
    while index < len(destinations) and len(operation.attempts) < runner.config.max_attempts:
        destination = destination_from_dict(destinations[index])
        runner.reach(operation, "reschedule")
        runner.calls.take_lease(request.instance_uuid, runner.config.lease_seconds)
        refused = runner.calls.write(
            request.instance_uuid,
            destination.allocation_request,
            project_id=request.project_id,
            user_id=request.user_id,
        )
        if refused is None:
            runner.done(operation, "reschedule", index=index)
            return index
        operation.attempts.append({"host": destination.host, "reason": f"the service refused the claim: {refused}"})
        runner.journal.save(operation)
        index += 1
    if operation.request.get(DESTINATION) is not None and len(operation.attempts) < runner.config.max_attempts:
        return _select_again(runner, operation, request, destinations)
    raise NoValidHost(request.instance_uuid, operation.attempts)


def _select_again(
    runner: Runner, operation: Operation, request: ServerRequest, destinations: list[dict[str, Any]]
) -> int:
    """A gang's build whose host refused (it has no alternates): its allocations given back, its
    lease kept, and the scheduler asked again; the index of the destination to try next."""
    runner.reach(operation, "reschedule")
    runner.calls.release(request.instance_uuid)
    runner.calls.take_lease(request.instance_uuid, runner.config.lease_seconds)
    refused_before = {attempt.get("host") for attempt in operation.attempts}
    index = len(destinations)
    destinations.extend(_select(runner, operation, request, len(operation.attempts)))
    runner.done(operation, "reschedule", destinations=destinations, index=index)
    chosen = destinations[index]["host"]
    if chosen not in refused_before:
        return index
    # The scheduler knows nothing of the agents' refusals: a host that refused is chosen again. It
    # counts as one more attempt, and the new selection's alternates come next.
    operation.attempts.append({"host": chosen, "reason": "chosen again by the scheduler after it refused"})
    runner.journal.save(operation)
    return _next_alternate(runner, operation, request, destinations, index + 1)


def _try_host(runner: Runner, operation: Operation, request: ServerRequest, destination: dict[str, Any]) -> str | None:
    """None when the host claimed the instance and started its guest; else why not, with
    everything it took given back. The consumers the pick removed from this host's tree are named
    in the claim (the agent drops their claims first) and their servers ended before the guest
    starts."""
    host = str(destination["host"])
    try:
        agent = runner.agent(host)
    except UnknownHost as e:
        return str(e)
    victims = [
        str(v["consumer_uuid"])
        for v in operation.selections.get(PREEMPTED) or []
        if v.get("root_provider_uuid") == destination.get("root_provider_uuid")
    ]
    # What the scheduler's claim (or the reschedule's write) made the instance hold, just before:
    # the host need not read it again when that is its own plan.
    held = destination_from_dict(destination).allocation_request.allocations
    runner.reach(operation, "claim")
    try:
        instance = request.instance(runner.scheduler_config)
        if operation.kind == UNSHELVE:
            claim = agent.unshelve_claim(instance, victims, held)
        else:
            claim = agent.instance_claim(instance, victims, held)
    except ClaimError as e:
        return f"the agent refused the claim: {e}"
    except NotConnected as e:
        return f"the agent did not answer: {e}"
    except TransportError as e:
        # Its claim may have landed (the agent killed after its write, before its answer): it lets
        # the instance go before another host is tried, or this host would keep a claim nobody
        # undoes. Not reached, it raises: the build stops with the journal naming this host, whose
        # undo (now, or a resume's) lets go.
        agent.delete_instance(request.instance_uuid)
        return f"the agent did not answer: {e}"
    runner.done(operation, "claim", write=False, host=host, claim_id=claim.claim_id)
    for victim in victims:
        runner.reach(operation, "preempt")
        outcome = preemption.end_victim(runner, victim, operation.instance_uuid, host)
        LOG.info("build of %s: %s, preempted, %s", operation.instance_uuid, victim, outcome)
    runner.reach(operation, "spawn")
    try:
        agent.spawn_guest(request.instance_uuid, claim.claim_id)
    except (ClientError, TransportError) as e:
        agent.destroy_guest(request.instance_uuid)
        agent.abort(claim.claim_id)
        runner.done(operation, "claim", host=None, claim_id=None)
        return f"the guest did not start: {e}"
    runner.done(operation, "spawn")
    return None


def _undo(runner: Runner, operation: Operation) -> None:
    """Give back everything a build that will not be finished holds: the guest and claims on the
    host it was trying, and its allocations (never confirmed, so all of them are the build's)."""
    instance = operation.instance_uuid
    destinations = operation.selections.get("destinations") or []
    if destinations:
        host = str(destinations[int(operation.selections.get("index", 0))]["host"])
        agent = runner.agents.get(host)
        if agent is not None and host in runner.scheduler_config.hosts_down:
            # Its agent silent past host_down_after: the build ends on the books alone (its server
            # could not be deleted while the undo waited), the host's part waits for the host.
            runner.leave_clean_up(CLEANUP, operation, host, link="build")
        elif agent is not None:
            agent.destroy_guest(instance)
            agent.delete_instance(instance)
    runner.calls.release_lease(instance)
    runner.calls.release(instance)


def resume(runner: Runner, operation: Operation) -> Operation:
    """A dead conductor's build: finished if its guest was started, otherwise undone. An unshelve
    on the instance's own host is finished."""
    if operation.request.get("on_host"):
        _unshelve_on_host(runner, operation, ServerRequest.from_dict(operation.request))
        return runner.end(operation, DONE)
    if operation.step in FINISHING_STEPS:
        try:
            runner.run(operation, "confirm", lambda: runner.calls.confirm_lease(operation.instance_uuid), write=False)
        except LeaseExpired:
            _undo(runner, operation)
            return runner.end(operation, ROLLED_BACK, "the lease expired before a conductor resumed the build")
        return runner.end(operation, DONE)
    _undo(runner, operation)
    return runner.rolled_back(operation, "its conductor died before the guest was started")
