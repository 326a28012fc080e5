"""Every allocation write of the tracker: "make these consumers hold exactly this", in one request.

Nothing ever deletes part of a consumer's allocations: each write reads the consumers, computes
their whole new allocation sets from what it read, and posts them all in one ``POST /allocations``
with their consumer generations. On a generation conflict it reads again and recomputes, so a step
written this way is harmless to repeat (crash recovery does exactly that). A consumer that is to
hold nothing at all is deleted instead, with no read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from berth.clients.placement import JSON, ConsumerState, PlacementClient, retry_on_conflict
from berth.domain.host import allocations
from berth.domain.host.allocations import Allocations
from berth.domain.host.records import INSTANCE, MIGRATION

# consumer -> (its whole new allocation set, its consumer type or None to keep the one it has)
Desired = dict[str, tuple[Allocations, str | None]]
DesiredFn = Callable[[dict[str, ConsumerState]], Desired]


class ConsumerWriter:
    def __init__(self, placement: PlacementClient):
        self.placement = placement

    def rewrite(
        self,
        consumers: Iterable[str],
        desired: DesiredFn,
        *,
        owner: tuple[str, str],
        what: str,
        known: Mapping[str, ConsumerState] | None = None,
    ) -> None:
        """Make the consumers' allocations what ``desired(states)`` says, in one POST /allocations.

        ``desired`` gets fresh ``ConsumerState`` objects on every attempt; consumers it leaves out,
        and those that already hold what it wants, are not written. ``owner`` (project, user) is
        used for consumers that do not exist yet. ``known``: the states of every consumer as the
        caller read them just before, under the host's lock, used by the first attempt instead of
        reading them again (a state gone stale meanwhile fails that attempt's write on its
        generation, and the next attempt reads afresh).
        """
        names = list(consumers)
        first = dict(known) if known is not None and set(names) <= set(known) else None

        def attempt() -> None:
            nonlocal first
            states, first = first or {uuid: self.placement.consumer(uuid) for uuid in names}, None
            writes = {
                uuid: _write(states[uuid], wanted, consumer_type, owner)
                for uuid, (wanted, consumer_type) in desired(states).items()
                if allocations.clean(wanted) != allocations.clean(states[uuid].allocations)
            }
            if writes:
                self.placement.write_consumers(writes)

        retry_on_conflict(attempt, what=what)

    def clear(self, *consumers: str) -> None:
        """The consumers hold nothing anywhere: a ``DELETE /allocations/{consumer}`` each, which needs
        no read first (nothing is wanted whatever they held) and is harmless to repeat."""
        for consumer in consumers:
            self.placement.delete_consumer(consumer)


def _write(state: ConsumerState, wanted: Allocations, consumer_type: str | None, owner: tuple[str, str]) -> JSON:
    known_type = state.consumer_type if state.consumer_type in (INSTANCE, MIGRATION) else None
    return {
        "allocations": allocations.clean(wanted),
        "generation": state.generation,
        "project_id": state.project_id or owner[0],
        "user_id": state.user_id or owner[1],
        "consumer_type": consumer_type or known_type or INSTANCE,
    }
