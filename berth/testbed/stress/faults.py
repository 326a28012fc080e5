"""The faults a stress run injects while the claimers run, and when."""

from __future__ import annotations

import os
import random
import signal
import time

from berth.testbed import processes
from berth.testbed.errors import TestbedError
from berth.testbed.failover.cluster import PatroniCluster
from berth.testbed.services.postgres import PostgresServer
from berth.testbed.services.server import Server
from berth.testbed.stress.config import StressConfig

FAILOVER_TIMEOUT = 60.0


def fault_times(config: StressConfig) -> list[float]:
    """Seconds into the load at which to inject the fault: spread evenly over the run."""
    if config.fault == "none":
        return []
    n = config.fault_count
    if config.operations:
        return [1.0 + 2.0 * k for k in range(n)]
    return [config.seconds * (k + 1) / (n + 1) for k in range(n)]


def check_fault(
    config: StressConfig, server: Server | None, postgres: PostgresServer | None, cluster: PatroniCluster | None = None
) -> None:
    """A :class:`TestbedError` when the run cannot inject its fault."""
    if config.fault == "kill-server" and server is None:
        raise TestbedError("--fault kill-server needs a server this run starts (no --url)")
    if config.fault == "kill-worker" and server is None and not config.server_pid:
        raise TestbedError("--fault kill-worker with --url needs --server-pid (the server's master process)")
    if config.fault == "restart-postgres" and postgres is None:
        raise TestbedError(
            "--fault restart-postgres needs --database postgresql (a PostgreSQL this run starts and may restart)"
        )
    if config.fault == "failover" and cluster is None:
        raise TestbedError("--fault failover starts its own Patroni cluster and servers (no --url, no --database)")


def inject(
    config: StressConfig,
    server: Server | None,
    postgres: PostgresServer | None,
    rng: random.Random,
    cluster: PatroniCluster | None = None,
) -> str:
    """Inject the fault once; what was done, for the log and the report."""
    if config.fault == "kill-worker":
        master = server.process.pid if server and server.process else config.server_pid
        workers = processes.children_of(master) if master else []
        if not workers:
            raise TestbedError(f"no worker processes under pid {master}")
        victim = rng.choice(workers)
        os.kill(victim, signal.SIGKILL)
        return f"SIGKILL to worker {victim} of {len(workers)}"
    if config.fault == "kill-server" and server is not None and server.process is not None:
        began = time.monotonic()
        pgid = server.process.pid
        server.kill_group()
        time.sleep(config.down_seconds)
        server.start(port=server.port)
        return f"SIGKILL to process group {pgid}, back on port {server.port} after {time.monotonic() - began:.1f}s"
    if config.fault == "restart-postgres" and postgres is not None:
        down = postgres.restart(mode="fast", down_seconds=config.down_seconds)
        return f"pg_ctl stop -m fast + start, down {down:.1f}s"
    if config.fault == "failover" and cluster is not None:
        began = time.monotonic()
        old = cluster.crash_leader()
        new = cluster.wait_leader(FAILOVER_TIMEOUT, other_than=old)
        promoted = time.monotonic() - began
        # The next failover needs a synchronous standby to promote: wait until the old primary is back
        # as one (Patroni rewinds it and starts it as a replica).
        cluster.wait_replicas(FAILOVER_TIMEOUT)
        return (
            f"kill -9 of the primary PostgreSQL on {old}; {new} primary after {promoted:.1f}s, "
            f"{old} back as a replica after {time.monotonic() - began:.1f}s"
        )
    raise AssertionError(config.fault)
