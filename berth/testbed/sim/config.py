"""The settings of one simulation (``berth sim``'s options)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class SimConfig:
    hosts: int = 1000
    ops: int = 20000
    concurrency: int = 16
    # The chance, per operation, that a fault is injected beside it.
    faults: float = 0.05
    seed: int = 1
    # None or "sqlite": a SQLite file; "postgresql": a throwaway PostgreSQL (which a fault may
    # restart); "patroni": a Patroni cluster of two PostgreSQL nodes for the service and the
    # conductors' journal (whose primary a fault kills); any other SQLAlchemy URL is used as it is.
    database: str | None = None
    workers: int = 3
    # Hosts run as ``berth agent`` processes of their own (faults kill them); the others share
    # ``pools`` processes.
    real_agents: int = 4
    pools: int = 1
    # Live instances the workload aims at, per host.
    instances_per_host: float = 2.5
    # ``berth conductor`` processes (one worker each); 0: one per core.
    conductors: int = 0
    # Conductors' timing: an owner silent this long is dead (kept well above any step's length).
    dead_after: float = 8.0
    heartbeat_interval: float = 1.0
    # Hosts' registrations: the agent processes beat this often, the pooled hosts (one request for
    # them all) that often, and a host silent for ``host_down_after`` is down.
    agent_beat_interval: float = 1.0
    pool_beat_interval: float = 2.0
    host_down_after: float = 5.0
    # How long a conductor killed by a fault stays down.
    conductor_down: float = 2.0
    # Weights of the faults' kinds over the defaults (``faults.KINDS``), by kind.
    fault_weights: dict[str, int] = field(default_factory=dict)
    # The share of builds whose flavor is preemptible (priority 0); the others' flavors have a
    # priority above it and preempt when nothing fits. None: every flavor at 0, nothing preempts.
    preemptible: float | None = None
    # The run's project's VCPU limit, as a share of the cloud's VCPU capacity, enforced by the
    # service on every allocation write (``--enforce-quotas-on-allocations``). None: no limit.
    quota: float | None = None
    json: str | None = None
    # Keep the run's folder (the processes' logs, the databases) after a clean run too; a run that
    # found a problem always keeps it.
    keep_files: bool = False

    def __post_init__(self) -> None:
        if self.hosts < self.real_agents + 2:
            raise ValueError(f"--hosts is at least {self.real_agents + 2}")
        if self.conductors < 0:
            raise ValueError("--conductors is at least 1 (or 0: one per core)")
        if self.ops < 1 or self.concurrency < 1:
            raise ValueError("--ops and --concurrency are at least 1")
        if not 0.0 <= self.faults <= 1.0:
            raise ValueError("--faults is a probability, between 0 and 1")
        if self.quota is not None and self.quota <= 0.0:
            raise ValueError("--quota is a share of the cloud's VCPUs, above 0")
        if self.preemptible is not None and not 0.0 <= self.preemptible <= 1.0:
            raise ValueError("--preemptible is a share of the builds, between 0 and 1")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
