"""The seeded random mix of server operations, run through conductors by ``concurrency`` worker
threads (one conductor each, as separate conductor processes would be), with the faults drawn beside
them; and the recovery of what killed conductors left behind."""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, Final

from berth.clients.placement import PlacementClient
from berth.conductor.conductor import Conductor
from berth.conductor.journal import DONE, FAILED, RUNNING, Journal, Operation
from berth.conductor.requests import ServerRequest
from berth.conductor.runner import ConductorConfig
from berth.scheduler.settings import SelectionSettings
from berth.testbed.sim.cloud import Cloud, session
from berth.testbed.sim.config import SimConfig
from berth.testbed.sim.faults import ConductorCrash, Faults
from berth.testbed.sim.groups import Groups
from berth.testbed.sim.instances import (
    ACTIVE,
    ALLOWED,
    FINISHING,
    Instance,
    Instances,
    outcome,
)
from berth.testbed.sim.layout import FLAVORS, Layout
from berth.testbed.sim.report import Tally

LOG = logging.getLogger(__name__)

# How often each operation is drawn, among those some idle instance allows.
WEIGHTS: Final[dict[str, int]] = {
    "delete": 8,
    "soft_delete": 4,
    "restore": 4,
    "resize": 6,
    "migrate": 5,
    "confirm_resize": 5,
    "revert_resize": 4,
    "live_migrate": 6,
    "shelve": 4,
    "shelve_offload": 3,
    "unshelve": 5,
    "rebuild": 4,
}
# Draws of an operation before a worker's turn counts as skipped (every candidate instance busy).
CHOOSE_TRIES: Final = 100
GROUP_SHARE: Final = 0.1
GROUP_SIZE: Final = 4
ZONE_SHARE: Final = 0.2


class Workload:
    def __init__(self, config: SimConfig, layout: Layout, cloud: Cloud, journal_url: str, faults: Faults, tally: Tally):
        self.config = config
        self.layout = layout
        self.cloud = cloud
        self.faults = faults
        self.tally = tally
        self.instances = Instances()
        self.groups = Groups()
        self.journal = Journal(journal_url)
        self.count = 0
        self.count_lock = threading.Lock()
        # Operations a killed conductor left, by id: what to apply once one is resumed.
        self.pending: dict[str, tuple[str, Instance | None, dict[str, Any]]] = {}
        # Those of them that are counted when they end (a killed conductor's operation): when each began.
        self.crashed: dict[str, float] = {}
        self.pending_lock = threading.Lock()
        self.recoverer: Conductor | None = None
        self.recover_lock = threading.Lock()
        self.timers: list[threading.Timer] = []
        self.host_down_lock = threading.Lock()
        self.errors: list[str] = []

    # -- conductors --------------------------------------------------------------------------------

    def conductor(self, hook: bool = True) -> Conductor:
        conductor = Conductor(
            PlacementClient(self.cloud.server.url, attempts=8, session=session()),
            self.journal,
            agents=self.cloud.agents(),
            scheduler_config=self.layout.scheduler_config,
            settings=SelectionSettings(host_subset_size=4),
            config=ConductorConfig(
                max_attempts=3, dead_after=self.config.dead_after, heartbeat_interval=self.config.heartbeat_interval
            ),
            hook=self.faults.hook if hook else None,
        )
        conductor.start()
        return conductor

    # -- the run -----------------------------------------------------------------------------------

    def run(self, progress: Callable[[], None]) -> None:
        threads = [
            threading.Thread(target=self._worker, args=(i, progress), name=f"sim-worker-{i}", daemon=True)
            for i in range(self.config.concurrency)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def _next(self) -> int | None:
        with self.count_lock:
            if self.count >= self.config.ops:
                return None
            self.count += 1
            return self.count

    def _worker(self, index: int, progress: Callable[[], None]) -> None:
        rng = random.Random(self.config.seed * 7919 + index)
        conductor = self.conductor()
        try:
            while self._next() is not None:
                try:
                    conductor = self._one(conductor, rng)
                except Exception as e:  # noqa: BLE001 - the run goes on; the error is reported
                    self.errors.append(f"{type(e).__name__}: {e}")
                progress()
        finally:
            conductor.close()

    def _one(self, conductor: Conductor, rng: random.Random) -> Conductor:
        fault = self.faults.draw(rng)
        if fault == "host_down":
            self._host_down(conductor, rng)
        elif fault == "spawn_failure":
            self.faults.spawn_failure(rng, conductor.runner.agents)
        elif fault == "conflict_storm":
            self.faults.conflict_storm(rng, self._hot_roots(rng))
        elif fault == "api_worker_kill":
            self.faults.api_worker_kill(rng)
        elif fault == "failover" and self.faults.cluster is not None:
            self.faults.failover(self.faults.cluster)
        elif fault == "conductor_crash":
            self.faults.arm_crash(rng)
        elif fault == "agent_kill_migration":
            self.faults.arm_migration_kill()
        try:
            kind, instance = self._choose(rng)
            # Every instance an operation could take is busy: wait for one rather than lose the turn.
            for _ in range(CHOOSE_TRIES):
                if kind != "":
                    break
                time.sleep(0.05)
                kind, instance = self._choose(rng)
            if kind == "":
                self.tally.skipped()
                return conductor
            return self._execute(conductor, kind, instance, rng)
        finally:
            self.faults.disarm()

    def _choose(self, rng: random.Random) -> tuple[str, Instance | None]:
        if self.faults.migration_kill_armed():
            real = set(self.cloud.real)
            movable = [i for i in self.instances.idle((ACTIVE,)) if i.host in real]
            rng.shuffle(movable)
            for instance in movable:
                if self.instances.take(instance.server.instance_uuid):
                    return rng.choice(["migrate", "live_migrate"]), instance
        live = len(self.instances.items)
        target = self.config.hosts * self.config.instances_per_host
        idle: dict[str, list[Instance]] = {}
        for i in self.instances.idle():
            idle.setdefault(i.state, []).append(i)
        allowed = sorted({k for state in idle for k in ALLOWED[state]} - {"evacuate"})
        kinds = ["build", *allowed]
        weights = [40 if live < target else 6, *(WEIGHTS[k] for k in allowed)]
        for _ in range(10):
            kind = rng.choices(kinds, weights)[0]
            if kind == "build":
                return kind, None
            candidates = [
                i for s, allows in ALLOWED.items() if kind in allows for i in idle.get(s, ()) if _may(i, kind)
            ]
            if kind == "resize":
                candidates = [i for i in candidates if _resizable(i.server)]
            if not candidates:
                continue
            instance = rng.choice(candidates)
            if self.instances.take(instance.server.instance_uuid):
                return kind, instance
        return "", None

    def _execute(self, conductor: Conductor, kind: str, instance: Instance | None, rng: random.Random) -> Conductor:
        extra: dict[str, Any] = {}
        if instance is None:
            server = self._new_server(rng)
            extra["server"] = server
            self.instances.take(server.instance_uuid)
        else:
            server = instance.server
            if kind == "unshelve":
                extra["server"] = server
        instance_uuid = server.instance_uuid
        since = time.time()
        began = time.monotonic()
        operation: Operation | None
        try:
            operation = self._call(conductor, kind, instance, self.groups.attach(server), rng)
        except ConductorCrash as crash:
            self._crashed(conductor, crash.operation, kind, instance, extra, began)
            return self.conductor()
        except Exception:  # noqa: BLE001 - a refusal or a failure: the journal says which
            operation = self._started_since(instance_uuid, since, kind)
        seconds = time.monotonic() - began
        ok = operation is not None and operation.state == DONE
        self.tally.operation(kind, ok, seconds, len(operation.attempts) if operation else 0)
        if operation is not None and operation.state == FAILED and operation.step and kind in FINISHING:
            self.tally.half_finished[kind] += 1
        self._apply(kind, instance, operation, extra)
        return conductor

    def _started_since(self, instance_uuid: str, since: float, kind: str) -> Operation | None:
        """The operation a call that raised had started for the instance, if it started one: the
        newest of its kind journaled since ``since`` (the wall clock the journal writes). An instance
        is worked on by one call at a time, but not only by calls: the clean-up of an evacuation that
        ended runs after the instance is free again, so an operation of another kind may be newer."""
        ops = [op for op in self.journal.for_instance(instance_uuid) if op.created_at >= since and op.kind == kind]
        return ops[-1] if ops else None

    def _apply(self, kind: str, instance: Instance | None, operation: Operation | None, extra: dict[str, Any]) -> None:
        """The instance after the operation; one left running stays busy until it is resumed."""
        if operation is not None and operation.state == RUNNING:
            with self.pending_lock:
                self.pending[operation.id] = (kind, instance, extra)
            return
        after = instance if operation is None else outcome(instance, kind, operation, extra)
        uuid_ = _uuid_of(instance, extra)
        if after is not None:
            self.instances.put(after)
        self.instances.free(uuid_)

    def _call(
        self, conductor: Conductor, kind: str, instance: Instance | None, server: ServerRequest, rng: random.Random
    ) -> Operation:
        u = server.instance_uuid
        if kind == "build":
            return conductor.build(server)
        assert instance is not None
        simple: dict[str, Callable[[str], Operation]] = {
            "delete": conductor.delete,
            "soft_delete": conductor.soft_delete,
            "restore": conductor.restore,
            "shelve": conductor.shelve,
            "shelve_offload": conductor.shelve_offload,
            "rebuild": conductor.rebuild,
        }
        if kind in simple:
            return simple[kind](u)
        if kind == "resize":
            flavors = [c.flavor for c in FLAVORS if c.resizable and c.flavor.name != server.flavor.name]
            return conductor.resize(server, rng.choice(flavors))
        if kind == "migrate":
            return conductor.migrate(server)
        if kind == "live_migrate":
            return conductor.live_migrate(server)
        if kind == "unshelve":
            return conductor.unshelve(server)
        assert instance.move is not None
        if kind == "confirm_resize":
            return conductor.confirm_resize(instance.move.id)
        return conductor.revert_resize(instance.move.id)

    def _new_server(self, rng: random.Random) -> ServerRequest:
        choice = rng.choices(FLAVORS, [c.weight for c in FLAVORS])[0]
        zone = rng.choice(sorted(self.layout.zone_aggregates)) if rng.random() < ZONE_SHARE else None
        server = ServerRequest(
            str(uuid.UUID(int=rng.getrandbits(128))), choice.flavor, "sim", "sim", availability_zone=zone
        )
        if rng.random() < GROUP_SHARE:
            with self.groups.lock:
                open_groups = [g for g, members in self.groups.members.items() if len(members) < GROUP_SIZE]
            group = (
                rng.choice(open_groups)
                if open_groups and rng.random() < 0.75
                else str(uuid.UUID(int=rng.getrandbits(128)))
            )
            self.groups.join(group, server.instance_uuid)
        return server

    def _hot_roots(self, rng: random.Random) -> list[str]:
        hosts = sorted({i.host for i in self.instances.idle((ACTIVE,)) if i.host})
        picked = rng.sample(hosts, min(8, len(hosts)))
        return [self.cloud.roots[h] for h in picked if h in self.cloud.roots]

    # -- a conductor killed between two steps ------------------------------------------------------

    def _crashed(
        self,
        conductor: Conductor,
        operation: Operation,
        kind: str,
        instance: Instance | None,
        extra: dict[str, Any],
        began: float,
    ) -> None:
        """The worker's conductor is dead (its heartbeat stops); another resumes the operation once
        the owner counts as dead."""
        conductor.close()
        with self.pending_lock:
            self.pending[operation.id] = (kind, instance, extra)
            self.crashed[operation.id] = began
        timer = threading.Timer(self.config.dead_after + 1.0, self.recover)
        timer.daemon = True
        self.timers.append(timer)
        timer.start()

    def recover(self) -> int:
        """Resume what dead conductors left; apply what each resumed operation ended as. The number
        of operations still pending."""
        with self.recover_lock:
            if self.recoverer is None:
                self.recoverer = self.conductor(hook=False)
            try:
                self.recoverer.resume()
            except Exception as e:  # noqa: BLE001 - tried again at the end
                LOG.warning("resume failed (tried again later): %s", e)
            with self.pending_lock:
                ids = list(self.pending)
            for op_id in ids:
                operation = self.journal.get(op_id)
                if operation is None or operation.state == RUNNING:
                    continue
                with self.pending_lock:
                    kind, instance, extra = self.pending.pop(op_id)
                    began = self.crashed.pop(op_id, None)
                if began is not None:
                    ok = operation.state == DONE
                    self.tally.operation(kind, ok, time.monotonic() - began, len(operation.attempts))
                self._apply(kind, instance, operation, extra)
            return len(self.pending)

    def finish(self, timeout: float = 120.0) -> int:
        """After the workers: resume until nothing is left running (or ``timeout``); what is left."""
        for timer in self.timers:
            timer.join()
        deadline = time.monotonic() + timeout
        left = self.recover()
        while (left or self.journal.running()) and time.monotonic() < deadline:
            time.sleep(1.0)
            left = self.recover()
        self._finish_half_finished()
        if self.recoverer is not None:
            self.recoverer.close()
        return left + len(self.journal.running())

    def _finish_half_finished(self, tries: int = 3) -> None:
        """Confirm (or revert) again each move whose confirm (or revert) failed midway, as an
        operator would: what the books hold for it is otherwise neither the move's nor its end's."""
        rng = random.Random(self.config.seed)
        for _ in range(tries):
            half = self.instances.half_finished()
            if not half:
                return
            if self.recoverer is None:
                self.recoverer = self.conductor(hook=False)
            for instance in half:
                assert instance.move is not None and instance.move.finishing is not None
                if self.instances.take(instance.server.instance_uuid):
                    self._execute(self.recoverer, instance.move.finishing, instance, rng)

    # -- a host down: its instances evacuated, then the host back ------------------------------------

    def _left_running(self, instance_uuid: str) -> bool:
        """Whether the instance waits for the resume of an operation left running."""
        with self.pending_lock:
            return any(_uuid_of(instance, extra) == instance_uuid for _, instance, extra in self.pending.values())

    def _host_down(self, conductor: Conductor, rng: random.Random) -> None:
        if not self.host_down_lock.acquire(blocking=False):
            return
        try:
            host = rng.choice(sorted(self.cloud.real))
            self.instances.down.add(host)
            deadline = time.monotonic() + 60
            # Operations under way on the host end first; those a killed conductor left wait for their resume.
            while time.monotonic() < deadline and any(
                i.server.instance_uuid in self.instances.busy and not self._left_running(i.server.instance_uuid)
                for i in self.instances.involving(host)
            ):
                time.sleep(0.2)
            agent = self.cloud.real[host]
            agent.kill()
            self.tally.fault("host_down")
            evacuations = []
            for instance in self.instances.on_host(host):
                if instance.state != ACTIVE or not self.instances.take(instance.server.instance_uuid):
                    continue
                since, began = time.time(), time.monotonic()
                try:
                    operation: Operation | None = conductor.evacuate(self.groups.attach(instance.server), host)
                except Exception:  # noqa: BLE001 - no host for it: it stays on its host
                    operation = self._started_since(instance.server.instance_uuid, since, "evacuate")
                ok = operation is not None and operation.state == DONE
                self.tally.operation(
                    "evacuate", ok, time.monotonic() - began, len(operation.attempts) if operation else 0
                )
                if ok and operation is not None:
                    evacuations.append(operation.id)
                self._apply("evacuate", instance, operation, {})
            agent.restart()
            for evacuation in evacuations:
                began = time.monotonic()
                try:
                    conductor.clean_up_evacuated(evacuation)
                    self.tally.operation("clean_up_evacuated", True, time.monotonic() - began, 0)
                except Exception:  # noqa: BLE001 - counted; the invariants will tell what it left
                    self.tally.operation("clean_up_evacuated", False, time.monotonic() - began, 0)
        finally:
            self.instances.down.discard(host)
            self.host_down_lock.release()


def _uuid_of(instance: Instance | None, extra: dict[str, Any]) -> str:
    """The instance an operation works on (a build's is in ``extra``)."""
    return instance.server.instance_uuid if instance else str(extra["server"].instance_uuid)


def _may(instance: Instance, kind: str) -> bool:
    """A move half confirmed (or half reverted) is only finished by the same operation."""
    return instance.move is None or instance.move.finishing in (None, kind)


def _resizable(server: ServerRequest) -> bool:
    return any(c.resizable and c.flavor.name == server.flavor.name for c in FLAVORS)
