"""What a bench run is asked to do."""

from __future__ import annotations

from dataclasses import dataclass, field

REQUEST_TIMEOUT = 300.0


@dataclass
class BenchConfig:
    url: str | None = None  # a running server (loopback only); else one per host count is started
    database: str | None = None  # for a started server: None (SQLite), "postgresql" or a SQLAlchemy URL
    workers: int = 4
    hosts: list[int] = field(default_factory=lambda: [1000])
    queries: int = 200
    clients: int = 8
    claims_seconds: float = 10.0
    create_clients: int = 8
    allocations: int = 0
    pick_clients: int = 16
    pick_seconds: float = 10.0
    group_size: int = 10
    gang_clients: int = 16
    gang_seconds: float = 10.0
    gang_sizes: list[int] = field(default_factory=lambda: [10, 100])
    json: str | None = None
