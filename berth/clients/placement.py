"""A small client for the Placement API, as the tracker (and the scheduler) use it.

Every request speaks microversion 1.39.  Writes guarded by a provider or consumer generation fail
with 409 ``placement.concurrent_update`` when someone else wrote first; the helpers here re-read and
retry such writes (``retry_on_conflict``), while a 409 for lack of capacity is final and surfaces as
``CapacityExceeded``.  Transport errors and 503s are retried a few times with a short back-off.

The client speaks as a service (an agent, the scheduler, a conductor): by default it says the roles a
real cloud gives a service user, Nova's for one, ``admin`` and ``service`` (``SERVICE_ROLES``), so
that it may do what Placement's default rules keep for the service, such as reshaping.  It says them
in ``X-Roles``, which only the noauth2 development mode reads: under a real token (Berth's tokens
file, Keystone) the token's own roles count and the header is not read (keystonemiddleware removes
it).  A person's tools (the ``berth`` client commands, ``berth audit``, reading a Placement to move
it) send ``roles=()``: their token's roles alone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast
from urllib.parse import urlencode

from berth.clients.errors import (
    CapacityExceeded,
    GenerationConflict,
    LeaseExpired,
    PlacementError,
    PlacementUnavailable,
)
from berth.clients.http import Answer, ConnectionPools, JsonHttp, TransportError
from berth.domain import error_codes
from berth.domain.host import allocations
from berth.domain.host.allocations import Allocations

__all__ = ["SERVICE_ROLES", "ConsumerState", "PlacementClient", "retry_on_conflict"]

LOG = logging.getLogger(__name__)

MICROVERSION = "1.39"
LEASES_PATH = "/berth/leases"  # Berth's extension: claim leases
# A real cloud's service user's roles (Nova's: admin and service); see the module's docstring.
SERVICE_ROLES: tuple[str, ...] = ("admin", "service")
_Result = TypeVar("_Result")
JSON = dict[str, Any]


@dataclass
class ConsumerState:
    """A consumer's allocations as Placement has them (``generation`` None: no such consumer)."""

    uuid: str
    allocations: Allocations = field(default_factory=dict)
    generation: int | None = None
    project_id: str | None = None
    user_id: str | None = None
    consumer_type: str | None = None

    def on(self, providers: Collection[str]) -> Allocations:
        return allocations.on(self.allocations, providers)

    def outside(self, providers: Collection[str]) -> Allocations:
        return allocations.outside(self.allocations, providers)


def retry_on_conflict(fn: Callable[[], _Result], *, attempts: int = 8, what: str = "write") -> _Result:
    """Run ``fn`` (which must re-read what it writes) again while it hits generation conflicts."""
    for attempt in range(1, attempts):
        try:
            return fn()
        except GenerationConflict as e:
            LOG.info("%s: generation conflict (%s), refreshing and retrying", what, e.detail)
            time.sleep(min(0.01 * 2**attempt, 0.5))
    return fn()


class PlacementClient:
    def __init__(
        self,
        url: str,
        token: str = "admin",
        *,
        timeout: float = 30.0,
        attempts: int = 4,
        roles: Collection[str] = SERVICE_ROLES,
        pools: ConnectionPools | None = None,
    ):
        self.url = url.rstrip("/")
        self.attempts = attempts
        headers = {"OpenStack-API-Version": f"placement {MICROVERSION}", "Accept": "application/json"}
        if token:
            headers["X-Auth-Token"] = token
        if roles:
            headers["X-Roles"] = ",".join(roles)
        self.http = JsonHttp(self.url, headers, timeout=timeout, pools=pools)
        self._known_classes: set[str] = set()
        self._known_traits: set[str] = set()

    @property
    def headers(self) -> dict[str, str]:
        """The headers every request carries (a caller may change the microversion)."""
        return self.http.headers

    # -- transport ------------------------------------------------------------------------------

    def request(self, method: str, path: str, body: object = None, *, ok: Collection[int] = (200, 201, 204)) -> Any:
        """The answer's JSON (None for an empty answer); transport errors and 503s are retried."""
        delay = 0.2
        for attempt in range(1, self.attempts + 1):
            try:
                response = self.http.request(method, path, body)
            except TransportError as e:
                if attempt == self.attempts:
                    raise PlacementUnavailable(0, None, str(e), method, path) from None
                LOG.warning("%s %s failed (%s); retrying", method, path, e)
                time.sleep(delay)
                delay *= 2
                continue
            if response.status == 503 and attempt < self.attempts:
                time.sleep(delay)
                delay *= 2
                continue
            if response.status in ok:
                return response.json() if response.content else None
            raise self._error(response, method, path)
        raise AssertionError("unreachable: the last attempt returns or raises")

    @staticmethod
    def _error(response: Answer, method: str, path: str) -> PlacementError:
        code: str | None = None
        detail = response.text
        try:
            body = response.json()
            if isinstance(body, dict) and "errors" not in body and "message" in body:
                # WebOb's own error (Placement's 401, answered before its errors are formatted):
                # the stock text, its markup left out.
                detail = " ".join(str(body["message"]).replace("<br />", " ").split())
            else:
                error = body["errors"][0]
                code, detail = error.get("code"), error.get("detail", detail)
        except (ValueError, KeyError, IndexError, TypeError):
            pass
        status = response.status
        cls: type[PlacementError]
        if status == 409 and code == error_codes.CONCURRENT_UPDATE:
            cls = GenerationConflict
        elif status == 409 and "Unable to allocate inventory" in (detail or ""):
            cls = CapacityExceeded
        elif status == 409 and code == error_codes.LEASE_EXPIRED:
            cls = LeaseExpired
        elif status == 503:
            cls = PlacementUnavailable
        else:
            cls = PlacementError
        return cls(status, code, detail, method, path)

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def ping(self) -> JSON:
        return cast(JSON, self.get("/"))

    # -- names ----------------------------------------------------------------------------------

    def ensure_resource_class(self, name: str) -> None:
        if not name.startswith("CUSTOM_") or name in self._known_classes:
            return
        self.request("PUT", f"/resource_classes/{name}")
        self._known_classes.add(name)

    def ensure_trait(self, name: str) -> None:
        if not name.startswith("CUSTOM_") or name in self._known_traits:
            return
        self.request("PUT", f"/traits/{name}")
        self._known_traits.add(name)

    # -- providers ------------------------------------------------------------------------------

    def get_provider(self, uuid: str) -> JSON | None:
        try:
            return cast(JSON, self.get(f"/resource_providers/{uuid}"))
        except PlacementError as e:
            if e.status == 404:
                return None
            raise

    def find_provider(self, name: str) -> JSON | None:
        found = self.get("/resource_providers?" + urlencode({"name": name}))
        providers = cast(list[JSON], found["resource_providers"])
        return providers[0] if providers else None

    def providers_in_tree(self, root_uuid: str) -> list[JSON]:
        return cast(list[JSON], self.get(f"/resource_providers?in_tree={root_uuid}")["resource_providers"])

    def create_provider(self, name: str, uuid: str, parent_uuid: str | None = None) -> JSON:
        body = {"name": name, "uuid": uuid}
        if parent_uuid:
            body["parent_provider_uuid"] = parent_uuid
        return cast(JSON, self.request("POST", "/resource_providers", body))

    def update_provider(self, uuid: str, name: str, parent_uuid: str | None) -> JSON:
        body = {"name": name, "parent_provider_uuid": parent_uuid}
        return cast(JSON, self.request("PUT", f"/resource_providers/{uuid}", body))

    def delete_provider(self, uuid: str) -> None:
        self.request("DELETE", f"/resource_providers/{uuid}")

    def get_inventories(self, uuid: str) -> tuple[int, dict[str, JSON]]:
        body = self.get(f"/resource_providers/{uuid}/inventories")
        return int(body["resource_provider_generation"]), dict(body["inventories"])

    def set_inventories(self, uuid: str, generation: int, inventories: dict[str, JSON]) -> int:
        body = self.request(
            "PUT",
            f"/resource_providers/{uuid}/inventories",
            {"resource_provider_generation": generation, "inventories": inventories},
        )
        return int(body["resource_provider_generation"])

    def get_traits(self, uuid: str) -> tuple[int, set[str]]:
        body = self.get(f"/resource_providers/{uuid}/traits")
        return int(body["resource_provider_generation"]), set(body["traits"])

    def set_traits(self, uuid: str, generation: int, traits: Iterable[str]) -> int:
        body = self.request(
            "PUT",
            f"/resource_providers/{uuid}/traits",
            {"resource_provider_generation": generation, "traits": sorted(traits)},
        )
        return int(body["resource_provider_generation"])

    def get_aggregates(self, uuid: str) -> tuple[int, set[str]]:
        body = self.get(f"/resource_providers/{uuid}/aggregates")
        return int(body["resource_provider_generation"]), set(body["aggregates"])

    def set_aggregates(self, uuid: str, generation: int, aggregates: Iterable[str]) -> int:
        body = self.request(
            "PUT",
            f"/resource_providers/{uuid}/aggregates",
            {"resource_provider_generation": generation, "aggregates": sorted(aggregates)},
        )
        return int(body["resource_provider_generation"])

    def usages(self, uuid: str) -> dict[str, int]:
        return dict(self.get(f"/resource_providers/{uuid}/usages")["usages"])

    def provider_allocations(self, uuid: str) -> dict[str, dict[str, int]]:
        """consumer uuid -> resource class -> amount, on one provider."""
        body = self.get(f"/resource_providers/{uuid}/allocations")
        return {consumer: dict(entry["resources"]) for consumer, entry in body["allocations"].items()}

    # -- consumers ------------------------------------------------------------------------------

    def lease(self, consumer: str) -> JSON | None:
        """Berth's claim lease on the consumer (docs/leases.md): ``consumer_uuid``, ``expires_at``,
        ``expires_in`` (seconds left, by the service's clock), ... None: no lease, or a Placement
        without Berth's leases, which answers 404 for the path."""
        try:
            return cast(JSON, self.get(f"{LEASES_PATH}/{consumer}"))
        except PlacementError as e:
            if e.status in (404, 405):
                return None
            raise

    def consumer(self, uuid: str) -> ConsumerState:
        body = self.get(f"/allocations/{uuid}")
        held = {rp: dict(entry["resources"]) for rp, entry in body["allocations"].items()}
        if not held:
            return ConsumerState(uuid)
        return ConsumerState(
            uuid,
            held,
            body.get("consumer_generation"),
            body.get("project_id"),
            body.get("user_id"),
            body.get("consumer_type"),
        )

    def delete_consumer(self, uuid: str) -> bool:
        """DELETE /allocations/{uuid}: the consumer holds nothing anywhere, whatever it held (no
        generation is needed for that). False when it held nothing already."""
        try:
            self.request("DELETE", f"/allocations/{uuid}")
        except PlacementError as e:
            if e.status == 404:
                return False
            raise
        return True

    def write_consumers(self, writes: dict[str, JSON]) -> None:
        """POST /allocations: every consumer's whole allocation set, atomically.

        ``writes`` maps consumer uuid to {"allocations", "generation", "project_id", "user_id",
        "consumer_type"}; empty allocations remove the consumer.
        """
        body: JSON = {}
        for consumer, w in writes.items():
            body[consumer] = {
                "allocations": {rp: {"resources": res} for rp, res in w["allocations"].items() if res},
                "consumer_generation": w["generation"],
                "project_id": w["project_id"],
                "user_id": w["user_id"],
                "consumer_type": w["consumer_type"],
            }
        self.request("POST", "/allocations", body)
