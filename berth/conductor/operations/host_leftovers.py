"""What a host that was down keeps for a server that left it without it: the guest and the claim
of a build undone while the host was down (``build``), or of a shelved server offloaded without it
(``lifecycle``). A clean-up, left by ``Runner.leave_clean_up``, waits for the host and lets go of
them there, on that host alone, sparing a server placed on that very host again since.

    clean_up_build, once the host is up: destroy ─▶ release_host ─▶ done
"""

from __future__ import annotations

from typing import Final

from berth.conductor.journal import DONE, RUNNING, Operation
from berth.conductor.runner import Runner

# The kind of the clean-up (named when builds alone left it, kept for the journals that hold it).
CLEANUP: Final = "clean_up_build"


def _placed_there_since(runner: Runner, clean_up: Operation, host: str) -> bool:
    """Whether an operation journaled after the clean-up placed the server on ``host``, or is
    placing it there now: the journal says so, not the service's books, which a claim the host
    lands late (its agent stalled, then back) would make look placed there while the server is
    not."""
    return any(
        later.created_at > clean_up.created_at
        and later.state in (DONE, RUNNING)
        and host in (later.selections.get("host"), later.selections.get("dest"))
        for later in runner.journal.for_instance(clean_up.instance_uuid)
        if later.id != clean_up.id
    )


def resume_clean_up(runner: Runner, operation: Operation) -> Operation:
    """The host is back: the guest and claims it kept for the server go, on that host alone
    (``delete_instance`` would release the instance's allocations everywhere, and the server may
    have been placed elsewhere since). Nothing if it was placed on this very host since."""
    instance, host = operation.instance_uuid, str(operation.request["host"])
    agent = runner.host_back(operation)
    if agent is None:
        return operation
    if _placed_there_since(runner, operation, host):
        operation.selections["server_left"] = f"the server was placed on {host} again: nothing to let go of there"
        return runner.end(operation, DONE)

    def release_host() -> None:
        for claim in agent.claims_for_instance(instance):
            agent.abort(claim.claim_id)

    # Both steps are harmless to repeat: each is written with the end.
    runner.run(operation, "destroy", lambda: agent.destroy_guest(instance), write=False)
    runner.run(operation, "release_host", release_host, write=False)
    return runner.end(operation, DONE)
