"""The Placement service's own metrics, counted beside the request metrics of berth.web (in the same
registry, so that one scrape answers them all; docs/operations.md)."""

from __future__ import annotations

from typing import Final

from prometheus_client import Counter, Gauge

from berth.web.observability.metrics import REGISTRY

ALLOCATION_CONFLICTS: Final = Counter(
    "berth_allocation_conflicts",
    "Allocation writes and picks refused with 409, by error code and, where Placement's code is"
    " undefined, by reason (capacity_exceeded, no_inventory, unit_constraints).",
    ["code", "reason"],
    registry=REGISTRY,
)
DB_TRANSACTION_RETRIES: Final = Counter(
    "berth_db_transaction_retries",
    "Transactions run again after a transient database error (deadlock, serialisation failure, busy, lost connection).",
    registry=REGISTRY,
)
DB_POOL_CONNECTIONS_IN_USE: Final = Gauge(
    "berth_db_pool_connections_in_use",
    "Database connections checked out of the workers' pools (each thread keeps one between requests).",
    multiprocess_mode="livesum",
    registry=REGISTRY,
)
