"""What a stress run is asked to do, and the names of what it counts."""

from __future__ import annotations

from dataclasses import dataclass

FAULTS = ("none", "kill-worker", "kill-server", "restart-postgres", "failover")
KINDS = ("create", "replace", "move", "delete", "pick", "confirm", "release")  # the writes
READS = ("candidates", "providers", "read-back", "lease-read")
# The share of rounds that pick with a lease when --picks is not given: a failover run's.
FAILOVER_PICKS = 0.15
OUTCOME_COLUMNS = ("2xx", "409", "503", "refused-conn", "lost-conn", "other")

# The project and user of every consumer the claimers write.
PROJECT = "5eeeeeee-0000-4000-8000-000000000001"
USER = "5eeeeeee-0000-4000-8000-000000000002"

REQUEST_TIMEOUT = 60.0
RESOLVE_GRACE = 60.0  # how long a claimer keeps trying to read back an uncertain write


@dataclass
class StressConfig:
    url: str | None = None  # a running server; else one is started
    database: str | None = None  # for a started server: sqlite (default), postgresql, or a URL
    workers: int = 4
    servers: int = 1  # berth serve processes on the one database; the claimers are spread over them
    concurrency: int = 8
    seconds: float = 30.0
    operations: int | None = None  # per claimer, instead of --seconds
    providers: int = 20
    fault: str = "none"
    fault_count: int = 1
    down_seconds: float = 1.0  # kill-server, restart-postgres: how long to stay down
    # The share of rounds that are POST /berth/pick with a lease (stress/leasing.py); None: 0.15
    # with --fault failover, else 0.
    picks: float | None = None
    postgres_nodes: int = 2  # failover: PostgreSQL nodes of the Patroni cluster
    server_pid: int | None = None  # kill-worker against --url: the server's master process
    seed: int | None = None
    keep: bool = False  # with --url: leave the providers and consumers behind
    json: str | None = None
    server_log: str | None = None  # copy the started server's log there


def pick_share(config: StressConfig) -> float:
    if config.picks is not None:
        return config.picks
    return FAILOVER_PICKS if config.fault == "failover" else 0.0
