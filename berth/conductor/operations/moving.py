"""What the moves share (resize, cold and live migration): the hand-over to a destination, and
its undo.

    schedule (and lease) ─▶ move_out ─▶ release_reservation ─▶ claim_dest
                                                                 │  ▲
                              the destination refused ◀──────────┘  │ next alternate (up to max_attempts hosts)

The scheduler claims the destination for the migration's consumer (under a lease), so that its
choice holds while the source hands the instance over. The destination's move claim then needs
that consumer empty (it gives it the source's allocations), so the reservation is released just
before the destination claims: another claim landing in that gap makes the destination refuse,
and the next alternate is tried.

The undo releases the reservation first if still leased (so that no side's revert takes it for
the instance's own), then gives the destination's side back (the migration's allocations go back
to the instance), then reverts the source's side and makes sure its guest runs in its active claim.
A move whose source refused its first step before anything was sent (``NotConnected``) asks no
agent: the reservation is all it made.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from berth.clients.agent import AgentClient
from berth.clients.errors import ClaimError
from berth.clients.http import NotConnected, TransportError
from berth.conductor.errors import NoValidHost, UnknownHost
from berth.conductor.journal import DONE, Operation
from berth.conductor.requests import ServerRequest, destinations_of
from berth.conductor.runner import Runner
from berth.domain.host.claims import Claim
from berth.domain.host.records import ACTIVE, SourceContext
from berth.domain.host.request import InstanceSpec
from berth.scheduler.explain import NoValidHost as SchedulerNoValidHost

# The destination's claim: the agent, the instance (with its current flavor), the source's context.
ClaimOn = Callable[[AgentClient, InstanceSpec, SourceContext], Claim]
# In a move's selections: its first step on the source was refused before anything was sent, so
# only the scheduler's reservation (in the service) is left to undo.
SOURCE_NEVER_REACHED = "source_never_reached"
# The source's side of a move ended while its host was down, carried out once it is up again:
# reverted (the move undone) or dropped (a live migration whose guest had left it).
CLEANUP = "clean_up_moved"
REVERT_SOURCE, DROP_SOURCE = "revert", "drop"


def hand_over(
    runner: Runner, operation: Operation, server: ServerRequest, claim_on: ClaimOn, *, other_host: bool = False
) -> SourceContext:
    """Every step up to the destination's claim (``operation.selections["dest"]`` and ``["claim_id"]``);
    with ``other_host``, the instance's own host is passed over."""
    migration = str(operation.request["migration_uuid"])
    source = runner.agent(str(operation.request["source"]))
    # Until the destination has claimed, a resume undoes the move whichever of these steps the
    # journal names, so only the destinations are written before the next step (the undo needs
    # them); the others' records go with the next write.
    runner.reach(operation, "schedule")
    schedule(runner, operation, server, migration, other_host=other_host)
    runner.reach(operation, "move_out")
    try:
        context = source.begin_move_out(server.instance_uuid, migration)
    except NotConnected:
        # Nothing of the move reached the source (its agent died, say, before anybody saw its host
        # down): the undo has nothing to ask it, and must not wait for a host that may never return.
        operation.selections[SOURCE_NEVER_REACHED] = True
        runner.journal.save(operation)
        raise
    runner.done(operation, "move_out", write=False, source_context=context.to_dict())
    release_reservation(runner, operation)
    instance = InstanceSpec(
        server.instance_uuid, context.flavor, server.project_id, server.user_id, server.anti_affinity()
    )
    claim_destination(runner, operation, server, lambda agent: claim_on(agent, instance, context), other_host)
    return context


def release_reservation(runner: Runner, operation: Operation) -> None:
    """The step that empties the migration's consumer for the destination's claim.

    The reservation is always leased (the scheduler takes the lease with its claim, or before it
    on Placement's path), so releasing the lease releases it: a lease that expired took its
    allocations with it, and nothing else writes the migration's consumer before the destination
    claims. One request, where a release of the allocations after it would always find none."""
    migration = str(operation.request["migration_uuid"])
    runner.run(operation, "release_reservation", lambda: runner.calls.release_lease(migration), write=False)


def schedule(
    runner: Runner, operation: Operation, server: ServerRequest, migration: str, *, other_host: bool = False
) -> None:
    """The destination claimed for the migration's consumer under a lease the scheduler takes with
    the claim (in the pick's own transaction on the service's path, just before the claim on
    Placement's), and the alternates; with ``other_host``, none of them the instance's own host
    (its reservation there would be wasted, and the move refused with a host left untried)."""
    spec = server.spec(runner.scheduler_config)
    try:
        selections = runner.selector.select_destinations(
            spec,
            1,
            alternates=runner.config.max_attempts - 1,
            server_group=server.group_for_move(),
            instance_uuids=[migration],
            lease_seconds=runner.config.lease_seconds,
            ignore_hosts=[str(operation.request["source"])] if other_host else (),
            moving_instance=server.instance_uuid,
        )
    except SchedulerNoValidHost as e:
        operation.attempts.append({"host": None, "reason": str(e)})
        raise NoValidHost(server.instance_uuid, operation.attempts, e.candidates) from e
    runner.done(operation, "schedule", destinations=destinations_of(selections[0]), index=0)


def claim_destination(
    runner: Runner,
    operation: Operation,
    server: ServerRequest,
    claim_on: Callable[[AgentClient], Claim],
    other_host: bool,
) -> None:
    """The scheduler's destination, then its alternates, until one claims (``claim_on``)."""
    destinations: list[dict[str, Any]] = operation.selections["destinations"]
    for index in range(int(operation.selections["index"]), len(destinations)):
        if len(operation.attempts) >= runner.config.max_attempts:
            break
        host = str(destinations[index]["host"])
        if other_host and host == operation.request["source"]:
            continue
        if operation.selections["index"] != index:
            # The undo reverts the destination the journal names: written before it claims.
            operation.selections["index"] = index
            runner.journal.save(operation)
        runner.reach(operation, "claim_dest")
        try:
            claim = claim_on(runner.agent(host))
        except (UnknownHost, ClaimError, NotConnected) as e:
            # Refused, or never reached (nothing of the request was sent): nothing to let go of.
            operation.attempts.append({"host": host, "reason": f"the destination refused the move: {e}"})
            runner.journal.save(operation)
            continue
        except TransportError as e:
            operation.attempts.append({"host": host, "reason": f"the destination did not answer: {e}"})
            runner.journal.save(operation)
            # Its claim may have landed (the agent killed after its write, before its answer): it
            # lets go before another host is tried, or the next one would find the migration
            # holding the instance's allocations and this host a claim nobody undoes. Not reached,
            # it raises: the move stops with the journal naming this host, whose undo (now, or a
            # resume's) reverts it.
            runner.agent(host).revert_migration(str(operation.request["migration_uuid"]))
            continue
        runner.done(operation, "claim_dest", dest=host, claim_id=claim.claim_id)
        return
    raise NoValidHost(server.instance_uuid, operation.attempts)


def undo(runner: Runner, operation: Operation) -> None:
    """The reservation first (if still leased), then the destination's side (it hands the
    migration's allocations back to the instance), then the source's side and its guest."""
    instance, migration = operation.instance_uuid, str(operation.request["migration_uuid"])
    # Still leased, the migration holds the scheduler's reservation, which no side must take for
    # the instance's own when it swaps back: released before either is asked. On the same host the
    # destination's revert is also the source's, so the reservation would become the instance's
    # allocations there (the new flavor's) while its claim went back to the old. Once the
    # destination has claimed there is no lease (it was released just before), and this does nothing.
    runner.calls.release_lease(migration)
    if operation.selections.get(SOURCE_NEVER_REACHED):
        # Stopped before any agent was asked (the destination claims after the source's step).
        runner.calls.release(migration)
        return
    undo_destination(runner, operation)
    source_host = str(operation.request["source"])
    source = runner.agents.get(source_host)
    if source is not None and source_host in runner.scheduler_config.hosts_down:
        # Its agent silent past host_down_after: the books are back already (the destination let
        # go), so the move ends and its server may be evacuated or deleted; the source's own side
        # (its claim outgoing, its guest perhaps stopped) waits for the host to be back.
        leave_source(runner, operation, REVERT_SOURCE)
    elif source is not None:
        source.revert_migration(migration)
        restore_guest(source, instance)
    runner.calls.release(migration)


def undo_destination(runner: Runner, operation: Operation, *, other_host: bool = False) -> None:
    """The host being tried lets go: its guest (on another host than the source) and its side.
    With ``other_host`` (a move the source is passed over for), a source named as the destination
    was never claimed on, and is not asked: an evacuation's is down, and asking it would keep the
    undo failing until it is back."""
    destinations = operation.selections.get("destinations") or []
    if not destinations:
        return
    dest_host = str(destinations[int(operation.selections.get("index", 0))]["host"])
    if other_host and dest_host == operation.request["source"]:
        return
    dest = runner.agents.get(dest_host)
    if dest is None:
        return
    if dest_host != operation.request["source"]:
        dest.destroy_guest(operation.instance_uuid)
    dest.revert_migration(str(operation.request["migration_uuid"]))


def restore_guest(agent: AgentClient, instance_uuid: str) -> None:
    """The instance's guest runs on ``agent`` in its active claim (restarted if it ran in another)."""
    active = [c for c in agent.claims_for_instance(instance_uuid) if c.state == ACTIVE]
    if not active:
        return
    claim_id = active[0].claim_id
    running = [g for g in agent.guests() if g.get("uuid") == instance_uuid]
    if running and running[0].get("claim_id") == claim_id:
        return
    if running:
        agent.destroy_guest(instance_uuid)
    agent.spawn_guest(instance_uuid, claim_id)


# -- the clean-up of a source that was down ---------------------------------------------------------


def leave_source(runner: Runner, operation: Operation, side: str) -> None:
    """The move goes on without its source, which is down: what the source itself keeps for it is
    left to a clean-up that waits for the host (``REVERT_SOURCE`` or ``DROP_SOURCE``)."""
    migration = str(operation.request["migration_uuid"])
    source = str(operation.request["source"])
    runner.leave_clean_up(CLEANUP, operation, source, link="move", migration_uuid=migration, side=side)


def drop_without_source(runner: Runner, operation: Operation) -> None:
    """A move going forward lets go of its source's side without asking the source, which is down:
    the books at once (the migration's allocations released), its agent (its claim, and any guest
    left) once it is back."""
    leave_source(runner, operation, DROP_SOURCE)
    runner.calls.release(str(operation.request["migration_uuid"]))


def resume_clean_up(runner: Runner, operation: Operation) -> Operation:
    """The source is back. A live migration's (``DROP_SOURCE``): its old guest and side go. An
    undone move's: its claim is the instance's again and its guest runs, unless the server left
    the host meanwhile (evacuated or deleted while it was down, whose own clean-ups take what the
    host kept for it: reverting here would give the instance this host's allocations again beside
    its new host's)."""
    instance, host = operation.instance_uuid, str(operation.request["host"])
    migration = str(operation.request["migration_uuid"])
    source = runner.host_back(operation)
    if source is None:
        return operation
    # Each step is harmless to repeat: each is written with the end.
    here = runner.calls.host_of(instance) == host
    if operation.request.get("side") == DROP_SOURCE:
        if not here:  # (a server moved back since has its new guest here)
            runner.run(operation, "destroy_source_guest", lambda: source.destroy_guest(instance), write=False)
        runner.run(operation, "drop_source", lambda: source.drop_move_claim(migration), write=False)
        return runner.end(operation, DONE)
    if not here:
        operation.selections["server_left"] = f"the server left {host} meanwhile: nothing to give back there"
        return runner.end(operation, DONE)
    runner.run(operation, "revert_source", lambda: source.revert_migration(migration), write=False)
    runner.run(operation, "source_guest", lambda: restore_guest(source, instance), write=False)
    return runner.end(operation, DONE)
