"""The faults a simulation injects beside its operations.

| fault | what is done |
|---|---|
| ``spawn_failure`` | the next spawn of a random host fails (the fake driver's ``/faults``) |
| ``conflict_storm`` | competing schedulers write and remove allocations on busy hosts at once (409s) |
| ``conductor_crash`` | a ``berth conductor`` process is killed (kill -9) with whatever it runs, and
  started again a little later; the others take its operations over |
| ``agent_kill_migration`` | the next move is of an instance on an agent process, whose agent is
  killed (kill -9) as soon as the move is journaled, and restarted |
| ``host_down`` | a real agent is killed, its instances evacuated, the agent restarted, the
  evacuations cleaned up |
| ``api_worker_kill`` | a worker of ``berth serve`` is killed (kill -9); on PostgreSQL, the server
  is restarted instead |
| ``failover`` | on a Patroni cluster, in place of ``api_worker_kill``: the primary's PostgreSQL is
  killed (kill -9); the other operations go on while the standby is promoted (one at a time) |
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from berth.clients.agent import AgentClient
from berth.clients.errors import ClientError
from berth.clients.placement import PlacementClient
from berth.testbed.failover.cluster import PatroniCluster
from berth.testbed.services.postgres import PostgresServer
from berth.testbed.sim.cloud.processes import Cloud
from berth.testbed.sim.reporting.report import Tally

LOG = logging.getLogger(__name__)

KINDS: Final[dict[str, int]] = {
    "spawn_failure": 35,
    "conflict_storm": 15,
    "conductor_crash": 15,
    "agent_kill_migration": 12,
    "host_down": 8,
    "api_worker_kill": 6,
}
MOVES: Final = ("resize", "migrate", "live_migrate")
STORM_THREADS: Final = 4
STORM_WRITES: Final = 20
# The weight of ``failover`` among the faults on a Patroni cluster (the others' sum to 91).
FAILOVER_WEIGHT: Final = 20
# How long a failover may take: the standby promoted, the old primary back as a replica.
FAILOVER_TIMEOUT: Final = 60.0


class Faults:
    def __init__(
        self,
        rate: float,
        cloud: Cloud,
        tally: Tally,
        postgres: PostgresServer | None,
        cluster: PatroniCluster | None = None,
        before_kill: Callable[[], None] = lambda: None,
        weights: Mapping[str, int] | None = None,
    ):
        self.rate = rate
        self.cloud = cloud
        self.tally = tally
        self.postgres = postgres
        self.cluster = cluster
        self.failing_over = threading.Lock()
        # Called before a conductor is killed (the CPU meter's last reading of it).
        self.before_kill = before_kill
        self.weights = {**KINDS, **(weights or {})}
        # What a worker thread has armed for its next operation.
        self.armed = threading.local()
        self.lock = threading.Lock()

    def draw(self, rng: random.Random) -> str | None:
        """The fault to inject beside this operation, if any."""
        if rng.random() >= self.rate:
            return None
        weights = dict(self.weights)
        if self.cluster is not None:
            # The database's failover takes the API worker's place, and comes more often: it is what
            # a run on a Patroni cluster is for.
            del weights["api_worker_kill"]
            weights["failover"] = FAILOVER_WEIGHT
        kinds = list(weights)
        if not self.cloud.real:
            kinds = [k for k in kinds if k not in ("agent_kill_migration", "host_down")]
        return rng.choices(kinds, [weights[k] for k in kinds])[0]

    # -- armed in the worker's thread for its next operation ----------------------------------

    def arm_migration_kill(self) -> None:
        self.armed.kill_source = True

    def migration_kill_armed(self) -> bool:
        return bool(getattr(self.armed, "kill_source", False))

    def disarm(self) -> None:
        self.armed.kill_source = False

    def strike_migration(self, kind: str, source: str | None) -> None:
        """The move just journaled: its source agent killed and started again, if armed for it."""
        if not self.migration_kill_armed() or kind not in MOVES:
            return
        self.armed.kill_source = False
        agent = self.cloud.real.get(source or "")
        if agent is not None:
            agent.restart()
            self.tally.fault("agent_kill_migration")

    # -- struck at once ------------------------------------------------------------------------

    def spawn_failure(self, rng: random.Random, agents: Mapping[str, AgentClient]) -> None:
        host = rng.choice(sorted(self.cloud.urls))
        client = agents[host]
        try:
            client.set_faults(fail_next_spawns=1)
        except (ClientError, OSError):
            return
        self.tally.fault("spawn_failure")

    def conflict_storm(self, rng: random.Random, hot_roots: list[str]) -> None:
        """Competing schedulers: each writes a consumer of its own onto the hot hosts and takes it
        away again, as fast as it can, moving those hosts' generations under everyone else."""
        if not hot_roots or self.cloud.placement is None:
            return
        url = self.cloud.server.url
        seeds = [rng.randrange(1 << 30) for _ in range(STORM_THREADS)]
        threads = [threading.Thread(target=compete, args=(url, hot_roots, s), name="sim-storm") for s in seeds]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.tally.fault("conflict_storm")

    def conductor_crash(self, rng: random.Random) -> None:
        if self.cloud.crash_conductor(rng.choice, self.before_kill) is not None:
            self.tally.fault("conductor_crash")

    def api_worker_kill(self, rng: random.Random) -> None:
        if self.postgres is not None:
            self.postgres.restart(mode="fast", down_seconds=0.5)
            self.tally.fault("postgres_restart")
            return
        if self.cloud.kill_api_worker(rng.choice) is not None:
            self.tally.fault("api_worker_kill")

    def failover(self, cluster: PatroniCluster) -> None:
        """kill -9 of the primary; this worker thread waits for the promotion and for the old primary
        to be back as the synchronous standby (the next failover needs one), the others go on."""
        if not self.failing_over.acquire(blocking=False):
            return  # one failover at a time
        try:
            old = cluster.crash_leader()
            self.tally.fault("failover")
            cluster.wait_leader(FAILOVER_TIMEOUT, other_than=old)
            cluster.wait_replicas(FAILOVER_TIMEOUT)
        finally:
            self.failing_over.release()


def compete(url: str, hot_roots: Sequence[str], seed: int, writes: int = STORM_WRITES) -> int:
    """One competing scheduler of a storm: ``writes`` times, a consumer of its own written onto one
    of the hot roots and removed again; how many of its writes the service took."""
    local = random.Random(seed)
    client = PlacementClient(url, attempts=1)
    taken = 0
    for _ in range(writes):
        consumer = str(uuid.uuid4())
        body = {
            "allocations": {local.choice(hot_roots): {"resources": {"VCPU": 1, "MEMORY_MB": 64}}},
            "consumer_generation": None,
            "project_id": "storm",
            "user_id": "storm",
            # Required at the client's microversion (1.38 on): without it every write was a 400,
            # and the storm moved no generation at all.
            "consumer_type": "INSTANCE",
        }
        try:
            client.request("PUT", f"/allocations/{consumer}", body)
            taken += 1
        except ClientError:
            # Even a refusal may follow a write that was made: a run left a storm's consumer
            # written just before its worker was killed, after a refusal had been answered for it
            # (the request sent again once its connection died, meeting the consumer it made). So
            # the consumer is removed whatever the answer (a 404 when it was never written).
            pass
        _remove(client, consumer)
    return taken


def _remove(client: PlacementClient, consumer: str, tries: int = 10) -> None:
    """The storm's consumer is gone, whatever it takes (a worker killed meanwhile, or the database
    restarting: the tries are spread over a few seconds)."""
    for attempt in range(tries):
        try:
            client.request("DELETE", f"/allocations/{consumer}", ok=(204, 404))
            return
        except ClientError:
            time.sleep(0.1 * (attempt + 1))
    LOG.warning("a conflict storm's consumer %s could not be removed", consumer)
