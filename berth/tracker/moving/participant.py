"""What a host offers in a move, whether it is a tracker in this process or an agent over HTTP.

``berth.tracker.moving.moves`` drives a move through two participants: the source hands its claim over
(``begin_move_out``), the destination claims (``resize_claim``, ``live_migration_claim``,
``evacuate_claim``), then each side confirms or reverts its own half. ``ResourceTracker`` and
``AgentClient`` both satisfy ``MoveParticipant``; mypy checks it below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from berth.domain.host.claims import Claim
from berth.domain.host.records import SourceContext
from berth.domain.host.request import Flavor, InstanceSpec

if TYPE_CHECKING:
    from berth.clients.agent import AgentClient
    from berth.tracker.tracker import ResourceTracker


class MoveParticipant(Protocol):
    """One host of a move: its source, its destination, or both (a resize to the same host)."""

    @property
    def host(self) -> str: ...

    # -- source side ------------------------------------------------------------------------------

    def begin_move_out(self, instance_uuid: str, migration_uuid: str) -> SourceContext:
        """Hand the instance's claim to the migration consumer; describe what it holds."""
        ...

    def cleanup_evacuated(self, instance_uuid: str, migration_uuid: str) -> list[str]:
        """The instance was evacuated away while this host was down: drop what is left here."""
        ...

    # -- destination side -------------------------------------------------------------------------

    def resize_claim(
        self, instance: InstanceSpec, new_flavor: Flavor, migration_uuid: str, source: SourceContext
    ) -> Claim: ...

    def live_migration_claim(self, instance: InstanceSpec, migration_uuid: str, source: SourceContext) -> Claim: ...

    def evacuate_claim(self, instance: InstanceSpec, migration_uuid: str, source_host: str) -> Claim: ...

    # -- ending the move, on either side ----------------------------------------------------------

    def confirm_migration(self, migration_uuid: str) -> list[str]:
        """Keep the move: the source drops its side, the destination's claim becomes the instance's."""
        ...

    def revert_migration(self, migration_uuid: str) -> list[str]:
        """Undo the move: the destination lets go, the source's claim is the instance's again."""
        ...

    def drop_move_claim(self, migration_uuid: str) -> str | None:
        """Release this host's side of the move only."""
        ...

    def abort(self, claim_id: str) -> str | None:
        """Undo one claim (a move claim is swapped back)."""
        ...


if TYPE_CHECKING:

    def _a_tracker_takes_part(tracker: ResourceTracker) -> MoveParticipant:
        return tracker

    def _an_agent_takes_part(agent: AgentClient) -> MoveParticipant:
        return agent
