"""``Conductor``: server operations across the scheduler, the service and the compute agents, each
a sequence of steps journaled as it goes (``berth.conductor.journal``), so that a conductor that
starts after another died finishes or undoes what the dead one left (``resume``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from types import TracebackType

from berth.clients.agent import AgentClient
from berth.clients.errors import ClientError
from berth.clients.http import TransportError
from berth.clients.placement import PlacementClient
from berth.conductor.errors import ConductorError
from berth.conductor.fence import Fence, new_owner
from berth.conductor.journal import Journal, Operation, TakenOver
from berth.conductor.operations import build as build_op
from berth.conductor.operations import delete as delete_op
from berth.conductor.operations import evacuation, host_leftovers, lifecycle, live_migration, moves, moving, preemption
from berth.conductor.requests import ServerRequest
from berth.conductor.runner import RESUME_FAILED, TAKEN_OVER, ConductorConfig, Runner, StepHook
from berth.conductor.service import ServiceCalls
from berth.scheduler.request.flavor import Flavor, SchedulerConfig
from berth.scheduler.selector import Selector
from berth.scheduler.settings import SelectionSettings

LOG = logging.getLogger(__name__)

# The clean-ups of a host that was down, left alone by a resume while it still is.
_WAITING_FOR_HOST = frozenset({host_leftovers.CLEANUP, delete_op.CLEANUP, moving.CLEANUP})
_RESUMERS: dict[str, Callable[[Runner, Operation], Operation]] = {
    build_op.KIND: build_op.resume,
    host_leftovers.CLEANUP: host_leftovers.resume_clean_up,
    delete_op.KIND: delete_op.resume,
    delete_op.CLEANUP: delete_op.resume_clean_up,
    moves.RESIZE: moves.resume,
    moves.MIGRATE: moves.resume,
    moves.CONFIRM: moves.resume_finish,
    moves.REVERT: moves.resume_finish,
    live_migration.KIND: live_migration.resume,
    build_op.UNSHELVE: build_op.resume,
    moving.CLEANUP: moving.resume_clean_up,
    evacuation.KIND: evacuation.resume,
    evacuation.CLEANUP: evacuation.resume_clean_up,
    **dict.fromkeys(lifecycle.STEPS, lifecycle.resume),
}


class Conductor:
    def __init__(
        self,
        placement: PlacementClient,
        journal: Journal | str,
        *,
        agents: Mapping[str, AgentClient],
        scheduler_config: SchedulerConfig | None = None,
        settings: SelectionSettings | None = None,
        config: ConductorConfig | None = None,
        hook: StepHook | None = None,
        owner: str | None = None,
    ):
        self.journal = journal if isinstance(journal, Journal) else Journal(journal)
        self.config = config or ConductorConfig()
        self.fence = Fence(owner or new_owner(), self.config.fencing_after)
        scheduler_config = scheduler_config or SchedulerConfig()
        selector = Selector(placement, config=scheduler_config, settings=settings, agents=agents)
        self.runner = Runner(
            self.journal, ServiceCalls(placement), agents, selector, scheduler_config, self.config, self.fence, hook
        )
        self.runner.victims = preemption.JournalServers(self.journal)
        self._stop = threading.Event()
        self._heart: threading.Thread | None = None

    # -- life -------------------------------------------------------------------------------------

    def start(self) -> list[Operation]:
        """Beat (so that no one takes this conductor's operations), then resume the dead ones'."""
        if self._heart is None:
            self.fence.arm()
            self._heart = threading.Thread(target=self._beat, name="conductor-heartbeat", daemon=True)
            self._heart.start()
        return self.resume()

    @property
    def owner(self) -> str:
        """The name this conductor's operations are journaled under now (``berth.conductor.fence``)."""
        return self.fence.owner

    def close(self) -> None:
        self._stop.set()
        if self._heart is not None:
            self._heart.join(timeout=5)
            self._heart = None

    def __enter__(self) -> Conductor:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _beat(self) -> None:
        while not self._stop.wait(self.config.heartbeat_interval):
            was, silent = self.fence.owner, self.fence.silent_for()
            owner = self.fence.before_beat()
            if owner != was:
                LOG.warning(
                    "no heartbeat written in time (the last %.1f s ago): the operations of %s are left to the "
                    "conductors' resume; this conductor goes on as %s",
                    silent,
                    was,
                    owner,
                )
            try:
                self.journal.beat(owner)
                self.fence.beaten(owner)
            except Exception:  # the next beat tries again; a conductor that cannot write is dead to others
                LOG.exception("the conductor's heartbeat was not written")

    # -- operations -------------------------------------------------------------------------------

    def build(self, server: ServerRequest) -> Operation:
        return build_op.build(self.runner, server)

    def delete(self, instance_uuid: str, host: str | None = None) -> Operation:
        return delete_op.delete(self.runner, instance_uuid, host)

    def resize(self, server: ServerRequest, flavor: Flavor) -> Operation:
        return moves.move(self.runner, server, flavor)

    def migrate(self, server: ServerRequest) -> Operation:
        """A cold migration: a resize to the same flavor, to any host the scheduler picks (the
        instance's own included)."""
        return moves.move(self.runner, server)

    def live_migrate(self, server: ServerRequest) -> Operation:
        """Move the running guest to another host; undone unless the guest has left the source."""
        return live_migration.live_migrate(self.runner, server)

    def confirm_resize(self, move_id: str) -> Operation:
        return moves.finish(self.runner, move_id, moves.CONFIRM)

    def revert_resize(self, move_id: str) -> Operation:
        return moves.finish(self.runner, move_id, moves.REVERT)

    def evacuate(self, server: ServerRequest, source_host: str | None = None) -> Operation:
        """Rebuild on another host an instance whose host is down."""
        return evacuation.evacuate(self.runner, server, source_host)

    def clean_up_evacuated(self, evacuation_id: str) -> Operation:
        """The evacuation's source is back: its old guest and claim go."""
        return evacuation.clean_up(self.runner, evacuation_id)

    def soft_delete(self, instance_uuid: str) -> Operation:
        return lifecycle.change(self.runner, lifecycle.SOFT_DELETE, instance_uuid)

    def restore(self, instance_uuid: str) -> Operation:
        return lifecycle.change(self.runner, lifecycle.RESTORE, instance_uuid)

    def shelve(self, instance_uuid: str) -> Operation:
        return lifecycle.change(self.runner, lifecycle.SHELVE, instance_uuid)

    def shelve_offload(self, instance_uuid: str) -> Operation:
        return lifecycle.change(self.runner, lifecycle.SHELVE_OFFLOAD, instance_uuid)

    def rebuild(self, instance_uuid: str) -> Operation:
        """A new guest in the instance's claim on its own host."""
        return lifecycle.change(self.runner, lifecycle.REBUILD, instance_uuid)

    def unshelve(self, server: ServerRequest) -> Operation:
        """A shelved instance still on its host is active there again; an offloaded one is placed
        and claimed anew, as a build is."""
        return build_op.unshelve(self.runner, server)

    # -- recovery ---------------------------------------------------------------------------------

    def resume(self) -> list[Operation]:
        """Finish or undo every running operation whose owner is dead (silent for ``dead_after``
        seconds); those another conductor takes first are left to it. One whose resume fails (a
        host away) is left to nobody: the next resume(), of any conductor, tries it again."""
        resumed = []
        hosts_down = self.runner.scheduler_config.hosts_down
        for operation in self.journal.silent(self.owner, self.config.dead_after):
            if operation.kind in _WAITING_FOR_HOST and operation.request.get("host") in hosts_down:
                continue  # not taken, so that nobody writes it each round while its host is away
            taken = self.journal.take_over(operation, self.owner, self.config.dead_after)
            if taken is None:
                continue
            LOG.info("resuming %s %s of %s at step %r", taken.kind, taken.id, operation.owner, taken.step)
            taken.selections[TAKEN_OVER] = int(taken.selections.get(TAKEN_OVER, 0)) + 1
            try:
                resumed.append(_RESUMERS[taken.kind](self.runner, taken))
            except TakenOver as e:
                # Silent again for dead_after while resuming it (a failover), and taken by another.
                LOG.warning("resuming %s %s stopped: %s", taken.kind, taken.id, e)
            except (ClientError, ConductorError, TransportError) as e:
                # A host or the service away: expected while they are down, said without a traceback.
                LOG.warning("resuming %s %s failed (%s); it is left for the next resume", taken.kind, taken.id, e)
                self.journal.abandon(taken, f"{RESUME_FAILED}: {e}")
            except Exception as e:  # one operation's failure must not stop the others
                LOG.exception("resuming %s %s failed; it is left for the next resume", taken.kind, taken.id)
                self.journal.abandon(taken, f"{RESUME_FAILED}: {e}")
        return resumed
