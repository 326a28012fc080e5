"""What the scheduler asks of the service, over ``PlacementClient``: candidates, claims, and the
few reads its filters and weighers need. Berth's own extensions (``/berth/...``) are optional: a
real Placement answers them 404, and the scheduler does without.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any, Final, cast
from urllib.parse import quote, urlencode

from berth.clients.errors import GenerationConflict, PlacementError
from berth.clients.placement import PlacementClient
from berth.domain import error_codes
from berth.scheduler.errors import SchedulerError
from berth.scheduler.hosts.candidates import AllocationRequest, Candidates

LOG = logging.getLogger(__name__)

CANDIDATES_PATH: Final = "/allocation_candidates"
EXPLAIN_PATH: Final = "/berth/allocation_candidates/explain"
OPENAPI_PATH: Final = "/berth/openapi.json"
PICK_PATH: Final = "/berth/pick"
LEASES_PATH: Final = "/berth/leases"
# Nova's consumer type for an instance (microversion 1.38 asks for one on every write).
INSTANCE_CONSUMER_TYPE: Final = "INSTANCE"
COMPUTE_NODE_TRAIT: Final = "COMPUTE_NODE"
# How often a host name without a compute node known (a host down that never reported one) has the
# compute nodes read again: not at every pick while it stays down.
UNKNOWN_HOSTS_READ_SECONDS: Final = 10.0

Query = Sequence[tuple[str, str]]


def detail_of(error: PlacementError) -> str:
    """The service's own words: Placement writes a generic sentence, a blank line, then the detail."""
    paragraphs = [p.strip() for p in (error.detail or "").split("\n\n") if p.strip()]
    return " ".join(paragraphs[-1].split()) if paragraphs else str(error)


class ConsumerTaken(SchedulerError):
    """The instance already holds allocations: it is being scheduled elsewhere, or twice."""

    def __init__(self, consumer: str, detail: str):
        super().__init__(f"instance {consumer} already holds allocations: {detail}")
        self.consumer = consumer


class QuotaExceeded(SchedulerError):
    """The service refused the claim: it would take the project (or the user) over a limit. Not "no
    valid host": no other host would do, as Nova's over-quota refusal says."""

    code = error_codes.QUOTA_EXCEEDED

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail


class Service:
    def __init__(self, placement: PlacementClient):
        self.placement = placement
        self._extensions: frozenset[str] | None = None
        # Compute node provider uuid -> host name, as read (see host_names).
        self._host_names: dict[str, str] = {}
        # The same pairs the other way: host name -> compute node provider uuid.
        self._host_roots: dict[str, str] = {}
        self._unknown_read_at = -UNKNOWN_HOSTS_READ_SECONDS

    # -- candidates -------------------------------------------------------------------------------

    def candidates(self, query: Query) -> Candidates:
        body = self.placement.get(f"{CANDIDATES_PATH}?{urlencode(list(query))}")
        return Candidates.from_dict(cast(dict[str, Any], body))

    def explain(self, query: Query) -> dict[str, Any] | None:
        """Berth's count of what each condition of the query excluded; None from a service
        without the extension."""
        if EXPLAIN_PATH not in self.extensions():
            return None
        try:
            return cast(dict[str, Any], self.placement.get(f"{EXPLAIN_PATH}?{urlencode(list(query))}"))
        except PlacementError as e:
            LOG.info("the service did not explain the query: %s", e)
            return None

    def extensions(self) -> frozenset[str]:
        """The ``/berth/...`` paths the service offers, from its OpenAPI document (read once)."""
        if self._extensions is None:
            try:
                document = self.placement.get(OPENAPI_PATH)
            except PlacementError as e:
                if e.status not in (404, 405):
                    raise
                document = None
            paths = (document or {}).get("paths") or {}
            self._extensions = frozenset(p for p in paths if str(p).startswith("/berth/"))
        return self._extensions

    # -- claims -----------------------------------------------------------------------------------

    def claim(
        self, consumer: str, request: AllocationRequest, *, project_id: str, user_id: str
    ) -> PlacementError | None:
        """Write the instance's allocations as a new consumer; the refusal when the service says
        409 (no room any more). A consumer that exists already raises ``ConsumerTaken``."""
        body = {
            "allocations": {rp: {"resources": dict(res)} for rp, res in request.allocations.items()},
            "consumer_generation": None,
            "project_id": project_id,
            "user_id": user_id,
            "consumer_type": INSTANCE_CONSUMER_TYPE,
        }
        try:
            self.placement.request("PUT", f"/allocations/{consumer}", body)
        except GenerationConflict as e:
            if "consumer generation" in (e.detail or ""):
                raise ConsumerTaken(consumer, e.detail) from None
            return e
        except PlacementError as e:
            if e.status != 409:
                raise
            return e
        return None

    def release(self, consumer: str) -> None:
        """Remove an instance's allocations (gone already is fine)."""
        try:
            self.placement.request("DELETE", f"/allocations/{consumer}")
        except PlacementError as e:
            if e.status != 404:
                raise

    def lease(self, consumer: str, seconds: int) -> None:
        """A claim lease on the consumer (docs/leases.md), taken before its allocations are written:
        the service releases them if nobody confirms the lease in time."""
        self.placement.request("PUT", f"{LEASES_PATH}/{quote(consumer)}", {"expires_in": seconds})

    def release_lease(self, consumer: str) -> None:
        """The consumer's lease and, while leased, its allocations gone (no lease is fine)."""
        try:
            self.placement.request("DELETE", f"{LEASES_PATH}/{quote(consumer)}")
        except PlacementError as e:
            if e.status != 404:
                raise

    def pick(self, body: dict[str, Any]) -> dict[str, Any] | PlacementError:
        """Berth's pick-and-claim, for one consumer or a gang (``consumers``); its "no valid host"
        refusal is returned, not raised; a refusal by a quota raises ``QuotaExceeded``."""
        try:
            return cast(dict[str, Any], self.placement.request("POST", PICK_PATH, body))
        except GenerationConflict as e:
            if "consumer generation" in (e.detail or "") or "consumers" in body:
                named = body["consumer"]["uuid"] if "consumer" in body else "of the gang"
                raise ConsumerTaken(str(named), e.detail) from None
            raise
        except PlacementError as e:
            if e.code == error_codes.QUOTA_EXCEEDED:
                raise QuotaExceeded(detail_of(e)) from None
            if e.code not in (error_codes.PICK_NO_VALID_HOST, error_codes.PICK_GANG_NO_VALID_HOST):
                raise
            return e

    # -- reads for the filters and weighers --------------------------------------------------------

    def members_of(self, aggregate: str) -> set[str]:
        body = self.placement.get("/resource_providers?" + urlencode({"member_of": aggregate}))
        return {str(p["uuid"]) for p in body["resource_providers"]}

    def host_names(self, roots: Iterable[str]) -> dict[str, str]:
        """The name of each root provider: those met before from memory, the others from one read of
        every compute node's (then one by one for a root that is none). A compute node's provider is
        named after its host and its uuid derived from the name, so the pair never changes; reading
        every compute node for each scheduling was most of a scheduler's time at 1,000 hosts."""
        wanted = set(roots)
        names = {root: self._host_names[root] for root in wanted if root in self._host_names}
        if len(names) < len(wanted):
            self._read_compute_nodes()
            names.update({root: self._host_names[root] for root in wanted if root in self._host_names})
        for root in sorted(wanted - set(names)):
            provider = self.placement.get_provider(root)
            if provider:
                names[root] = str(provider["name"])
                self._remember(root, names[root])
            else:
                names[root] = root
        return names

    def host_roots(self, hosts: Iterable[str]) -> list[str]:
        """The root provider uuid of each host named that has a compute node, from the same memory
        as ``host_names`` (one read of every compute node's when a name is new to it)."""
        wanted = set(hosts)
        known = self._host_roots
        now = time.monotonic()
        if not wanted <= known.keys() and now - self._unknown_read_at >= UNKNOWN_HOSTS_READ_SECONDS:
            self._read_compute_nodes()
            # Only a read that was answered spares the next calls theirs: a failed one (the service
            # restarting, say) would otherwise leave every host it missed out of the picks' trees to
            # avoid for the next seconds, down hosts and a move's own source among them.
            self._unknown_read_at = now
        return sorted(known[name] for name in wanted if name in known)

    def _read_compute_nodes(self) -> None:
        body = self.placement.get("/resource_providers?" + urlencode({"required": COMPUTE_NODE_TRAIT}))
        for provider in body["resource_providers"]:
            self._remember(str(provider["uuid"]), str(provider["name"]))

    def _remember(self, root: str, name: str) -> None:
        self._host_names[root] = name
        self._host_roots[name] = root

    def consumers_on(self, provider: str) -> set[str]:
        body = self.placement.get(f"/resource_providers/{quote(provider)}/allocations")
        return set(body["allocations"])

    def providers_of(self, consumer: str) -> set[str]:
        body = self.placement.get(f"/allocations/{quote(consumer)}")
        return set(body["allocations"])

    def root_of(self, provider: str) -> str | None:
        found = self.placement.get_provider(provider)
        return None if found is None else str(found.get("root_provider_uuid") or provider)
