"""The seeded random mix of server operations, sent by ``concurrency`` worker threads to the
conductors' API (``berth conductor`` processes), each operation waited for in the conductors'
journal, with the faults drawn beside them."""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable
from typing import Any, Final

import sqlalchemy as sa

from berth.clients.conductor import ConductorError
from berth.conductor.journal import DONE, FAILED, RUNNING, Journal, Operation
from berth.conductor.operations import evacuation
from berth.conductor.records.tables import servers
from berth.conductor.requests import ServerRequest
from berth.testbed.sim.api import Lost
from berth.testbed.sim.checks import preempted
from berth.testbed.sim.cloud.faults import Faults
from berth.testbed.sim.cloud.layout import FLAVORS, HIGH_FLAVORS, ZONES, Layout
from berth.testbed.sim.cloud.processes import Cloud
from berth.testbed.sim.config import SimConfig
from berth.testbed.sim.groups import Groups
from berth.testbed.sim.instances import (
    ACTIVE,
    ALLOWED,
    DELETED,
    ERROR,
    FINISHING,
    RESIZED,
    Instance,
    Instances,
    outcome,
)
from berth.testbed.sim.reporting.report import Tally
from berth.testbed.sim.watch import Ends

LOG = logging.getLogger(__name__)
# What each request of the run got back (the run's folder keeps it: ``berth.testbed.sim.run``).
OPERATIONS_LOG = logging.getLogger("berth.testbed.sim.operations")

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
# The API's action for each operation (``POST /servers/{id}/action``); delete is ``DELETE /servers/{id}``.
ACTIONS: Final[dict[str, str]] = {
    "soft_delete": "softDelete",
    "restore": "restore",
    "shelve": "shelve",
    "shelve_offload": "shelveOffload",
    "rebuild": "rebuild",
    "migrate": "migrate",
    "live_migrate": "os-migrateLive",
    "unshelve": "unshelve",
    "confirm_resize": "confirmResize",
    "revert_resize": "revertResize",
}
# Draws of an operation before a worker's turn counts as skipped (every candidate instance busy).
CHOOSE_TRIES: Final = 100
GROUP_SHARE: Final = 0.1
GROUP_SIZE: Final = 4
ZONE_SHARE: Final = 0.2
# The share of hosts down one of whose servers is deleted while the host is down (Nova's "local
# delete": the host is cleaned up once it is back), before the others are evacuated.
LOCAL_DELETE_SHARE: Final = 0.5
# How long a worker waits for its operation's end; one still running then is settled at the finish.
OPERATION_TIMEOUT: Final = 120.0


# How long before a request was sent the operation it started may have been journaled: the
# journal's clock and the run's are one machine's, read at different moments.
CLOCK_SLACK: Final = 1.0


def started_since(operations: Iterable[Operation], kind: str, since: float, known: Collection[str]) -> str | None:
    """The newest operation of ``kind`` among ``operations`` (an instance's, oldest first) journaled
    since ``since``, give or take ``CLOCK_SLACK``, that is not one of ``known``: an operation of the
    same kind that the run started on the instance a moment before is not the lost request's."""
    found = [
        op.id for op in operations if op.kind == kind and op.created_at >= since - CLOCK_SLACK and op.id not in known
    ]
    return found[-1] if found else None


class Workload:
    def __init__(self, config: SimConfig, layout: Layout, cloud: Cloud, journal_url: str, faults: Faults, tally: Tally):
        self.config = config
        self.layout = layout
        self.cloud = cloud
        self.api = cloud.api
        self.faults = faults
        self.tally = tally
        self.instances = Instances()
        self.groups = Groups()
        self.journal = Journal(journal_url)
        self.ends = Ends(self.journal)
        self.count = 0
        self.count_lock = threading.Lock()
        # Operations still running when their worker stopped waiting, by id: what to apply once each
        # ends, and when it began.
        self.pending: dict[str, tuple[str, Instance | None, dict[str, Any], float]] = {}
        self.pending_lock = threading.Lock()
        self.group_lock = threading.Lock()
        self.host_down_lock = threading.Lock()
        self.errors: list[str] = []
        # Every operation the run started or found, by id: a request lost with its conductor is
        # matched in the journal only with an operation it did not know of.
        self.known_operations: set[str] = set()
        # The preemptions the service recorded, as the finish found them (``preempted.settle``).
        self.preempted = preempted.Preempted()

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
        while self._next() is not None:
            try:
                self._one(rng)
            except Exception as e:  # noqa: BLE001 - the run goes on; the error is reported
                LOG.exception("worker error")
                self.errors.append(f"{type(e).__name__}: {e}")
            progress()

    def _one(self, rng: random.Random) -> None:
        fault = self.faults.draw(rng)
        if fault == "host_down":
            self._host_down(rng)
        elif fault == "spawn_failure":
            self.faults.spawn_failure(rng, self.cloud.agents_of_thread())
        elif fault == "conflict_storm":
            self.faults.conflict_storm(rng, self._hot_roots(rng))
        elif fault == "api_worker_kill":
            self.faults.api_worker_kill(rng)
        elif fault == "failover" and self.faults.cluster is not None:
            self.faults.failover(self.faults.cluster)
        elif fault == "conductor_crash":
            self.faults.conductor_crash(rng)
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
                return
            self._execute(kind, instance, rng)
        finally:
            self.faults.disarm()

    def _choose(self, rng: random.Random) -> tuple[str, Instance | None]:
        if self.faults.migration_kill_armed():
            real = set(self.cloud.real)
            movable = self.instances.take_one((ACTIVE,), rng, lambda i: i.host in real)
            if movable is not None:
                return rng.choice(["migrate", "live_migrate"]), movable
        live = len(self.instances.items)
        target = self.config.hosts * self.config.instances_per_host
        allowed = sorted({k for state in self.instances.states() for k in ALLOWED[state]} - {"evacuate"})
        kinds = ["build", *allowed]
        weights = [40 if live < target else 6, *(WEIGHTS[k] for k in allowed)]
        for _ in range(10):
            kind = rng.choices(kinds, weights)[0]
            if kind == "build":
                return kind, None
            states = tuple(s for s, allows in ALLOWED.items() if kind in allows)
            chosen = self.instances.take_one(states, rng, functools.partial(_may_choose, kind=kind))
            if chosen is not None:
                return kind, chosen
        return "", None

    def _execute(self, kind: str, instance: Instance | None, rng: random.Random) -> None:
        extra: dict[str, Any] = {}
        if instance is not None and kind == "unshelve":
            extra["server"] = instance.server
        since = time.time()
        began = time.monotonic()
        operation_id: str | None = None
        try:
            operation_id = self._send(kind, instance, rng, extra)
            answer = "started"
        except Lost as e:
            # Its conductor was killed under it: the operation may have started (and is then taken over).
            operation_id = self._started_since(instance, kind, since, extra)
            answer = f"lost ({e}), {'found' if operation_id else 'not found'} in the journal"
        except ConductorError as e:
            if e.status >= 500:
                # The conductor's own failure (its database failing over): the operation may have
                # started before it, as after a lost answer.
                operation_id = self._started_since(instance, kind, since, extra)
                answer = f"failed ({e}), {'found' if operation_id else 'not found'} in the journal"
            else:
                operation_id = None  # refused, or no conductor answered: nothing started
                answer = f"refused: {e}"
        OPERATIONS_LOG.info("%s %s: %s %s", kind, _uuid_of(instance, extra), answer, operation_id or "")
        if operation_id is not None:
            self.known_operations.add(operation_id)
        if instance is None and operation_id is None:
            return self.tally.operation(kind, False, time.monotonic() - began, 0)
        if instance is not None and kind in ("migrate", "live_migrate", "resize") and operation_id is not None:
            self.faults.strike_migration(kind, instance.host)
        if kind == "delete" and instance is not None and instance.state == RESIZED:
            confirmed = self._confirmed_first(instance, since, began)
            if confirmed is None:
                return None  # its confirmation still runs: applied when it ends (``settle``)
            instance = confirmed
        operation = self.ends.wait(operation_id, OPERATION_TIMEOUT) if operation_id else None
        if operation_id is not None and operation is None:
            with self.pending_lock:
                self.pending[operation_id] = (kind, instance, extra, began)
            return None
        self._ended(kind, instance, operation, extra, began)
        return None

    def _confirmed_first(self, instance: Instance, since: float, began: float) -> Instance | None:
        """The instance as the confirmation of its move left it, which its delete (the servers API's,
        as Nova's) starts with, whether the delete then started or not; None when the confirmation
        still runs (it is then waited for with the operations left running)."""
        assert instance.move is not None
        move = instance.move.id
        confirms = [
            op
            for op in self.journal.for_instance(instance.server.instance_uuid)
            if op.kind == "confirm_resize" and op.request.get("move") == move and op.created_at >= since - 1.0
        ]
        if not confirms:
            return instance  # refused before it confirmed anything
        self.known_operations.add(confirms[-1].id)
        confirm = self.ends.wait(confirms[-1].id, OPERATION_TIMEOUT)
        if confirm is None:
            with self.pending_lock:
                self.pending[confirms[-1].id] = ("confirm_resize", instance, {}, began)
            return None
        OPERATIONS_LOG.info("delete %s: its move confirmed first, %s", instance.server.instance_uuid, confirm.state)
        return outcome(instance, "confirm_resize", confirm, {})

    def _ended(
        self, kind: str, instance: Instance | None, operation: Operation | None, extra: dict[str, Any], began: float
    ) -> None:
        if operation is not None and kind == "build":
            extra["server"] = ServerRequest.from_dict(operation.request)
        ok = operation is not None and operation.state == DONE
        if operation is not None:
            OPERATIONS_LOG.info(
                "%s %s: operation %s ended %s at step %r%s",
                kind,
                operation.instance_uuid,
                operation.id,
                operation.state,
                operation.step,
                f" ({operation.error})" if operation.error else "",
            )
        self.tally.operation(kind, ok, time.monotonic() - began, len(operation.attempts) if operation else 0)
        if operation is not None and operation.state == FAILED and operation.step and kind in FINISHING:
            self.tally.half_finished[kind] += 1
        self._apply(kind, instance, operation, extra)

    def _send(self, kind: str, instance: Instance | None, rng: random.Random, extra: dict[str, Any]) -> str:
        """The request that starts the operation; the operation's id."""
        if instance is None:
            return self._build(rng, extra)
        u = instance.server.instance_uuid
        if kind == "delete":
            answer = self.api.request("DELETE", f"/servers/{u}")
        elif kind == "resize":
            flavors = [c.flavor for c in FLAVORS if c.resizable and c.flavor.name != instance.server.flavor.name]
            answer = self.api.request(
                "POST", f"/servers/{u}/action", {"resize": {"flavorRef": rng.choice(flavors).name}}
            )
        else:
            answer = self.api.request("POST", f"/servers/{u}/action", {ACTIONS[kind]: None})
        return str(answer["operation"]["id"])

    def _build(self, rng: random.Random, extra: dict[str, Any]) -> str:
        share = self.config.preemptible
        flavors = FLAVORS if share is None or rng.random() < share else HIGH_FLAVORS
        choice = rng.choices(flavors, [c.weight for c in flavors])[0]
        name = extra["name"] = f"sim-{uuid.UUID(int=rng.getrandbits(128))}"
        server: dict[str, Any] = {"name": name, "flavorRef": choice.flavor.name}
        if rng.random() < ZONE_SHARE:
            server["availability_zone"] = rng.choice(ZONES)
        body: dict[str, Any] = {"server": server}
        if rng.random() < GROUP_SHARE:
            group = extra["group"] = self._group(rng)
            body["os:scheduler_hints"] = {"group": group}
        made = self.api.request("POST", "/servers", body)["server"]
        self._made(str(made["id"]), extra)
        return str(made["operation_id"])

    def _made(self, server_id: str, extra: dict[str, Any]) -> None:
        """A build's server is known: taken, and a member of its group."""
        extra["instance_uuid"] = server_id
        self.instances.take(server_id)
        if extra.get("group"):
            self.groups.join(str(extra["group"]), server_id)

    def _group(self, rng: random.Random) -> str:
        """An anti-affinity group to join: mostly one not yet full, else a new one."""
        with self.groups.lock:
            open_groups = sorted(g for g, members in self.groups.members.items() if len(members) < GROUP_SIZE)
        if open_groups and rng.random() < 0.75:
            return rng.choice(open_groups)
        with self.group_lock:
            made = self.api.make_group(f"sim-group-{len(self.groups.members)}")
            with self.groups.lock:
                self.groups.members.setdefault(made, [])
            return made

    def _started_since(self, instance: Instance | None, kind: str, since: float, extra: dict[str, Any]) -> str | None:
        """The operation a request whose conductor was killed under it started, if it started one:
        for a build, its server found by its name; the newest of its kind journaled for the instance
        since ``since`` (the wall clock the journal writes) that the run did not know of."""
        if instance is None:
            # Read through the journal's retries: the conductor may have died in a failover.
            query = sa.select(servers.c.id).where(servers.c.name == extra["name"])
            found = self.journal.read(lambda conn: conn.execute(query).scalar())
            if found is None:
                return None
            self._made(str(found), extra)
            instance_uuid = str(found)
        else:
            instance_uuid = instance.server.instance_uuid
        return started_since(self.journal.for_instance(instance_uuid), kind, since, self.known_operations)

    def _apply(self, kind: str, instance: Instance | None, operation: Operation | None, extra: dict[str, Any]) -> None:
        """The instance after the operation."""
        after = instance if operation is None else outcome(instance, kind, operation, extra)
        if after is not None:
            self.instances.put(after)
        uuid_ = _uuid_of(instance, extra)
        if uuid_ is not None:
            self.instances.free(uuid_)

    def _hot_roots(self, rng: random.Random) -> list[str]:
        hosts = sorted({i.host for i in self.instances.idle((ACTIVE,)) if i.host})
        picked = rng.sample(hosts, min(8, len(hosts)))
        return [self.cloud.roots[h] for h in picked if h in self.cloud.roots]

    # -- after the workers -----------------------------------------------------------------------

    def settle(self) -> int:
        """Apply what each operation left running at its worker's timeout ended as; how many still run."""
        with self.pending_lock:
            ids = list(self.pending)
        for op_id in ids:
            operation = self.journal.get(op_id)
            if operation is None or operation.state == RUNNING:
                continue
            with self.pending_lock:
                kind, instance, extra, began = self.pending.pop(op_id)
            self._ended(kind, instance, operation, extra, began)
        return len(self.pending)

    def finish(self, timeout: float = 120.0) -> int:
        """After the workers: every conductor back, every operation ended and applied (or ``timeout``),
        moves half finished finished, evacuations cleaned up; what is left running."""
        self.cloud.conductors_back()
        deadline = time.monotonic() + timeout
        left = self.settle()
        while (left or self.journal.running()) and time.monotonic() < deadline:
            time.sleep(1.0)
            left = self.settle()
        self._finish_half_finished()
        self._wait_clean_ups(deadline)
        if self.config.preemptible is not None:
            self.preempted = preempted.settle(self.cloud.server.url, self.journal, self.instances, deadline)
        self.ends.close()
        return left + len(self.journal.running())

    def _finish_half_finished(self, tries: int = 3) -> None:
        """Confirm (or revert) again each move whose confirm (or revert) failed midway, and delete
        again each instance whose delete did, as an operator would: what the books hold for it is
        otherwise neither the operation's start's nor its end's."""
        rng = random.Random(self.config.seed)
        for _ in range(tries):
            half = self.instances.half_finished()
            deleting = self.instances.half_deleted()
            if not half and not deleting:
                return
            for instance in half:
                assert instance.move is not None and instance.move.finishing is not None
                if self.instances.take(instance.server.instance_uuid):
                    self._execute(instance.move.finishing, instance, rng)
            # So are deletes that failed midway: deleted again.
            for instance in deleting:
                if self.instances.take(instance.server.instance_uuid):
                    self._execute("delete", instance, rng)

    def _wait_clean_ups(self, deadline: float) -> None:
        """Each evacuation done has its old host cleaned up by the conductors (once the host is back)."""
        while time.monotonic() < deadline:
            cleaned = {
                str(op.request.get("evacuation"))
                for op in self.journal.find(kind=evacuation.CLEANUP)
                if op.state != RUNNING
            }
            waiting = [op.id for op in self.journal.find(kind=evacuation.KIND, state=DONE) if op.id not in cleaned]
            if not waiting:
                return
            time.sleep(0.5)
        LOG.warning("evacuations not cleaned up in time")

    # -- a host down: its instances evacuated, then the host back ------------------------------------

    def _host_down(self, rng: random.Random) -> None:
        if not self.host_down_lock.acquire(blocking=False):
            return
        try:
            host = rng.choice(sorted(self.cloud.real))
            self.instances.down.add(host)
            deadline = time.monotonic() + 60
            # Operations under way on the host end first.
            while time.monotonic() < deadline and any(
                i.server.instance_uuid in self.instances.busy for i in self.instances.involving(host)
            ):
                time.sleep(0.2)
            agent = self.cloud.real[host]
            agent.kill()
            self.tally.fault("host_down")
            taken = {
                i.server.instance_uuid: i
                for i in self.instances.on_host(host)
                if i.state in (ACTIVE, ERROR) and self.instances.take(i.server.instance_uuid)
            }
            try:
                self._seen_down_or_fail(host)
                if taken and rng.random() < LOCAL_DELETE_SHARE:
                    self._execute("delete", taken.pop(min(taken)), rng)
                self._evacuate(host, taken)
            finally:
                for left in taken:  # not evacuated (an error of the run): they stay where they are
                    self.instances.free(left)
                agent.restart()
        finally:
            self.instances.down.discard(host)
            self.host_down_lock.release()

    def _seen_down(self, host: str) -> bool:
        """Whether the conductors show the host down; a conductor that fails the read (killed, or its
        database failing over) is asked again at the next look."""
        try:
            return bool(self.api.request("GET", f"/hosts/{host}")["host"]["state"] == "down")
        except (ConductorError, Lost) as e:
            LOG.info("host %s's state not read (%s); asking again", host, e)
            return False

    def _seen_down_or_fail(self, host: str) -> None:
        """Wait until the conductors see the host down."""
        deadline = time.monotonic() + self.config.host_down_after + 30.0
        while not self._seen_down(host):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the conductors did not see host {host} go down")
            time.sleep(0.25)

    def _evacuate(self, host: str, taken: dict[str, Instance]) -> None:
        """``POST /hosts/{name}/evacuate`` of a host the conductors see down; each evacuation waited
        for and applied (and its instance out of ``taken``)."""
        began = time.monotonic()
        try:
            started = self.api.request("POST", f"/hosts/{host}/evacuate")["operations"]
        except (ConductorError, Lost) as e:
            LOG.info("evacuation of %s refused: %s", host, e)
            started = []
        by_server = {str(op["server_id"]): str(op["id"]) for op in started}
        self.known_operations.update(by_server.values())
        for server_id in sorted(set(by_server) - set(taken)):
            late = self._late_arrival(server_id, host)
            if late is not None:
                taken[server_id] = late
                continue
            believed = self.instances.every().get(server_id)
            seen = f"{believed.state} on {believed.host}" if believed else "unknown to it"
            self.errors.append(
                f"the conductors evacuated server {server_id}, which the run did not take (it has it {seen})"
            )
        for server_id, instance in list(taken.items()):
            del taken[server_id]
            op_id = by_server.get(server_id)
            operation = self.ends.wait(op_id, OPERATION_TIMEOUT) if op_id else None
            if op_id is not None and operation is None:
                with self.pending_lock:
                    self.pending[op_id] = ("evacuate", instance, {}, began)
                continue
            self._ended("evacuate", instance, operation, {}, began)

    def _late_arrival(self, server_id: str, host: str) -> Instance | None:
        """A server the run learns is on the host only after it took the host's instances: a build
        that landed there just before the agent was killed, its end applied since, or one whose
        delete failed midway (the run has it to be deleted again, the conductors' row as it was; see
        ``instances.outcome``). Taken once its operation is applied (within ``OPERATION_TIMEOUT``)
        and the run has it there; else None."""
        deadline = time.monotonic() + OPERATION_TIMEOUT
        while not self.instances.take(server_id):
            if time.monotonic() > deadline:
                return None
            time.sleep(0.1)
        instance = self.instances.every().get(server_id)
        if instance is None or instance.host != host or instance.state == DELETED:
            self.instances.free(server_id)
            return None
        return instance


def _uuid_of(instance: Instance | None, extra: dict[str, Any]) -> str | None:
    """The instance an operation works on (a build's is in ``extra`` once known)."""
    return instance.server.instance_uuid if instance else extra.get("instance_uuid")


def may_run(instance: Instance, kind: str) -> bool:
    """A move half confirmed (or half reverted) is only finished by the same operation."""
    return instance.move is None or instance.move.finishing in (None, kind)


def _may_choose(instance: Instance, kind: str) -> bool:
    return may_run(instance, kind) and (kind != "resize" or _resizable(instance.server))


def _resizable(server: ServerRequest) -> bool:
    return any(c.resizable and c.flavor.name == server.flavor.name for c in FLAVORS)
