"""The operator's settings of the API."""

from __future__ import annotations

from dataclasses import dataclass

from berth.store.candidates.provider_cache import DEFAULT_CACHE_CAPACITY

# GET /metrics: not served, served to any caller, or under authentication and the rule berth:metrics.
METRICS_MODES = ("off", "open", "guarded")


@dataclass(frozen=True)
class Settings:
    """Operator settings of the API."""

    # Upper bound of allocation candidates generated for one request, whatever its limit.
    max_candidates: int = 1000
    # Visit trees from a random starting point and shuffle the answer, instead of provider order.
    randomize_candidates: bool = False
    # noauth2, tokens or keystone; see berth.web.access.auth.
    auth_strategy: str = "noauth2"
    tokens_file: str | None = None
    # oslo.policy rules overriding the defaults, and which defaults: secure RBAC (Placement's default,
    # oslo.policy's [oslo_policy] enforce_new_defaults) or, with False, the legacy ones.
    policy_file: str | None = None
    enforce_new_defaults: bool = True
    # Providers whose candidate data each worker keeps between requests (0: none).
    provider_cache_size: int = DEFAULT_CACHE_CAPACITY
    cors_allowed_origins: tuple[str, ...] = ()
    cors_allow_headers: tuple[str, ...] = ()
    # One of METRICS_MODES.
    metrics: str = "guarded"
    # The conductors' API whose control plane the dashboard page shows; None: the page shows none.
    dashboard_conductor: str | None = None
    # Check the projects' quotas on PUT and POST /allocations too, not only on the pick: off by
    # default, so that the Placement API means what it means in Placement (berth.store.quotas).
    enforce_quotas_on_allocations: bool = False
    # Weigh picks on each worker's board of every tree (berth.store.pick.board.host_board): fast at any
    # size, its ranking a refresh behind the books; off, every pick searches the database as it stands.
    pick_board: bool = True
