"""Preemption: the servers a build's pick removed to make room for it, ended.

The service's pick removes the victims' allocations in the claim's own transaction and records
them (docs/pick-and-claim.md, "Priorities and preemption"); their servers still run, and their
hosts still count their claims. The build journals the victims with its selection, names them in
its host's claim (the agent drops their claims first), and once that claim is made, before its own
guest starts, ends each victim as its flavor's ``berth:preemption_action`` says:

    delete          the server's own delete (``delete.delete``), journaled and resumed as any
    shelve_offload  ``preempted_offload``: the lifecycle's offload steps from any state a server
                    running on its host is in (a user's offload starts from SHELVED only)

Both operations carry ``preempted_by`` (the new server), which the server's row shows as its fault.
A victim that is not a server of this cloud (a consumer another client made) is only logged. A
victim awaiting a resize's or migration's confirmation has its move confirmed first. A
victim that cannot be ended now (another operation holds it, its host's agent is away) is left:
the conductors' housekeeping ends every recorded preemption whose server is still running
(``control.preemptions``), which also covers a conductor that died between the pick and here.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from berth.clients.errors import ClientError
from berth.clients.http import TransportError
from berth.conductor.errors import ConductorError
from berth.conductor.journal import DONE, Journal
from berth.conductor.operations import delete, lifecycle, moves
from berth.conductor.requests import flavor_from_dict
from berth.conductor.runner import Runner
from berth.conductor.victims import VictimServer
from berth.domain.errors import BerthError
from berth.scheduler.errors import SchedulerError
from berth.scheduler.request.priority import DELETE, SHELVE_OFFLOAD, preemption_action
from berth.scheduler.selection import Victim

LOG = logging.getLogger(__name__)

# The key of an operation's request naming the server whose build preempted it.
PREEMPTED_BY: Final = "preempted_by"

# What ending a victim came to.
ENDED: Final = "ended"
FOREIGN: Final = "foreign"
GONE: Final = "gone"
LEFT: Final = "left"


def action_of(flavor: dict[str, Any] | None) -> str:
    """The flavor's preemption action (delete when it names none, or one no longer valid)."""
    if not flavor:
        return DELETE
    try:
        return preemption_action(flavor_from_dict(flavor).extra_specs)
    except (SchedulerError, KeyError, ValueError):
        return DELETE


class JournalServers:
    """The servers a conductor without server records knows: those it built, from its journal (the
    flavor of the newest operation that names one; ended by a delete or an offload done)."""

    def __init__(self, journal: Journal):
        self.journal = journal

    def victim_server(self, instance_uuid: str) -> VictimServer | None:
        operations = self.journal.for_instance(instance_uuid)
        if not operations:
            return None
        flavor: dict[str, Any] | None = None
        host: str | None = None
        ended = False
        for operation in operations:
            request = operation.request
            named = request.get("flavor") or (request.get("server") or {}).get("flavor")
            flavor = named or flavor
            host = operation.selections.get("dest") or operation.selections.get("host") or host
            if operation.state == DONE:
                ended = operation.kind in (delete.KIND, lifecycle.SHELVE_OFFLOAD, lifecycle.PREEMPTED_OFFLOAD)
        return VictimServer(host, action_of(flavor), ended)


def victims_to_dicts(victims: tuple[Victim, ...]) -> list[dict[str, Any]]:
    return [
        {"consumer_uuid": v.consumer_uuid, "priority": v.priority, "root_provider_uuid": v.root_provider_uuid}
        for v in victims
    ]


def end_victim(runner: Runner, victim: str, preempted_by: str, host: str | None) -> str:
    """``victim``'s server ended as its flavor says; what it came to (``ENDED``, ``FOREIGN``,
    ``GONE``, or ``LEFT`` for the housekeeping to try again). ``host``: where the victim was
    removed from, when its server's own record names none."""
    server = runner.victims.victim_server(victim) if runner.victims is not None else None
    if server is None:
        LOG.info("%s was preempted by %s; it is no server of this cloud, nothing to end", victim, preempted_by)
        return FOREIGN
    if server.ended:
        return GONE
    where = server.host or host
    try:
        if server.move_id is not None:
            # A server awaiting its move's confirmation is neither deleted nor offloaded as it stands;
            # as Nova does when such a server is deleted, the move is confirmed first (the victim's
            # room on the destination is gone already; the source's side goes now).
            moves.finish(runner, server.move_id, moves.CONFIRM)
        if server.action == SHELVE_OFFLOAD and where is not None:
            operation = lifecycle.change(
                runner, lifecycle.PREEMPTED_OFFLOAD, victim, where, extra={PREEMPTED_BY: preempted_by}
            )
        else:
            operation = delete.delete(runner, victim, where, extra={PREEMPTED_BY: preempted_by})
    except (ClientError, ConductorError, BerthError, TransportError) as e:
        LOG.warning(
            "%s, preempted by %s, was not ended now (%s); the housekeeping tries again", victim, preempted_by, e
        )
        return LEFT
    return ENDED if operation.state == DONE else LEFT
