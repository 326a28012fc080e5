"""A client for ``berth agent``: the tracker's methods, over HTTP, for a conductor elsewhere.

``AgentClient`` has the compute tracker's method names and types, so a move drives agents and
trackers alike (the tracker's ``MoveParticipant`` protocol, which mypy checks for both). An agent's
error comes back as the ``ClaimError`` class of its code (``berth.clients.agent_error_codes``), the
very class the tracker raised, else as an ``AgentError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from berth.clients import agent_error_codes
from berth.clients.errors import (
    AgentError,
    ClaimError,
    ClaimFailed,
    ClaimNotFound,
    ClaimStateError,
    InvalidRequest,
    TrackerUnavailable,
)
from berth.clients.http import ConnectionPools, JsonHttp
from berth.domain.host.allocations import Allocations
from berth.domain.host.claims import Claim, NopClaim
from berth.domain.host.records import ClaimRecord, SourceContext
from berth.domain.host.request import Flavor, InstanceSpec
from berth.domain.host.snapshot import HostSnapshot

__all__ = ["AgentClient"]

JSON = dict[str, Any]

# The agent's codes that come back as their own classes (ClaimFailed is built from its reasons).
_ERRORS: dict[str, type[ClaimError]] = {
    agent_error_codes.CLAIM_REFUSED: ClaimError,
    agent_error_codes.CLAIM_NOT_FOUND: ClaimNotFound,
    agent_error_codes.CLAIM_INVALID_REQUEST: InvalidRequest,
    agent_error_codes.CLAIM_WRONG_STATE: ClaimStateError,
    agent_error_codes.CLAIM_PLACEMENT_UNAVAILABLE: TrackerUnavailable,
}


class AgentClient:
    def __init__(
        self, url: str, *, token: str | None = None, timeout: float = 60.0, pools: ConnectionPools | None = None
    ):
        self.url = url.rstrip("/")
        self.http = JsonHttp(self.url, {"X-Auth-Token": token} if token else {}, timeout=timeout, pools=pools)
        self._host: str | None = None

    @property
    def host(self) -> str:
        if self._host is None:
            self._host = str(self._call("GET", "/")["host"])
        return self._host

    def _call(self, method: str, path: str, body: JSON | None = None, params: dict[str, str] | None = None) -> Any:
        response = self.http.request(method, path, body, params=params)
        data = response.json() if response.content else None
        if response.status >= 400:
            error = (data or {}).get("error", {})
            code, message, reasons = error.get("code"), error.get("message", response.text), error.get("reasons", [])
            if code == agent_error_codes.CLAIM_DOES_NOT_FIT:
                raise ClaimFailed(reasons or [message])
            cls = _ERRORS.get(code or "")
            if cls is not None:
                raise cls(message, reasons=reasons)
            raise AgentError(response.status, code, message, reasons)
        return data

    def _result(self, method: str, path: str, body: JSON | None = None) -> Any:
        return self._call(method, path, body)["result"]

    def _claim(self, data: JSON) -> Claim:
        return Claim(ClaimRecord.from_dict(data), self)

    # -- claims -------------------------------------------------------------------------------

    def instance_claim(
        self, instance: InstanceSpec, preempted: Sequence[str] = (), held: Allocations | None = None
    ) -> Claim:
        """``preempted``: consumers the service removed to make room for the instance, whose claims
        the host drops before it claims; ``held``: all the instance holds in the service, as the
        scheduler's claim wrote it just before (the host then need not read it)."""
        return self._claim(self._call("POST", "/claims/instance", _claim_body(instance, preempted, held)))

    def unshelve_claim(
        self, instance: InstanceSpec, preempted: Sequence[str] = (), held: Allocations | None = None
    ) -> Claim:
        return self._claim(self._call("POST", "/claims/unshelve", _claim_body(instance, preempted, held)))

    def resize_claim(
        self, instance: InstanceSpec, new_flavor: Flavor, migration_uuid: str, source: SourceContext
    ) -> Claim:
        body = {
            "instance": instance.to_dict(),
            "flavor": new_flavor.to_dict(),
            "migration_uuid": migration_uuid,
            "source": source.to_dict(),
        }
        return self._claim(self._call("POST", "/claims/resize", body))

    def live_migration_claim(self, instance: InstanceSpec, migration_uuid: str, source: SourceContext) -> Claim:
        body = {"instance": instance.to_dict(), "migration_uuid": migration_uuid, "source": source.to_dict()}
        return self._claim(self._call("POST", "/claims/live_migration", body))

    def evacuate_claim(self, instance: InstanceSpec, migration_uuid: str, source_host: str) -> Claim:
        body = {"instance": instance.to_dict(), "migration_uuid": migration_uuid, "source_host": source_host}
        return self._claim(self._call("POST", "/claims/evacuate", body))

    def rebuild_claim(
        self, instance: InstanceSpec, migration_uuid: str | None = None, source_host: str | None = None
    ) -> Claim | NopClaim:
        body = {"instance": instance.to_dict(), "migration_uuid": migration_uuid, "source_host": source_host}
        data = self._call("POST", "/claims/rebuild", body)
        if data.get("claim_id") is None:
            return NopClaim(data["instance_uuid"], data["host"])
        return self._claim(data)

    def abort(self, claim_id: str) -> str | None:
        return cast(str | None, self._result("DELETE", f"/claims/{claim_id}"))

    # -- moves --------------------------------------------------------------------------------

    def begin_move_out(self, instance_uuid: str, migration_uuid: str) -> SourceContext:
        data = self._call("POST", f"/migrations/{migration_uuid}/source", {"instance_uuid": instance_uuid})
        return SourceContext.from_dict(data)

    def confirm_migration(self, migration_uuid: str) -> list[str]:
        return cast(list[str], self._result("POST", f"/migrations/{migration_uuid}/confirm"))

    def revert_migration(self, migration_uuid: str) -> list[str]:
        return cast(list[str], self._result("POST", f"/migrations/{migration_uuid}/revert"))

    def drop_move_claim(self, migration_uuid: str) -> str | None:
        return cast(str | None, self._result("POST", f"/migrations/{migration_uuid}/drop"))

    def cleanup_evacuated(self, instance_uuid: str, migration_uuid: str) -> list[str]:
        path = f"/migrations/{migration_uuid}/cleanup_evacuated"
        return cast(list[str], self._result("POST", path, {"instance_uuid": instance_uuid}))

    # -- instance life cycle ------------------------------------------------------------------

    def _instance(self, instance_uuid: str, action: str) -> list[Any]:
        return cast(list[Any], self._result("POST", f"/instances/{instance_uuid}/{action}"))

    def delete_instance(self, instance_uuid: str) -> list[str]:
        return self._instance(instance_uuid, "delete")

    def soft_delete_instance(self, instance_uuid: str) -> list[JSON]:
        return self._instance(instance_uuid, "soft_delete")

    def restore_instance(self, instance_uuid: str) -> list[JSON]:
        return self._instance(instance_uuid, "restore")

    def shelve_instance(self, instance_uuid: str) -> list[JSON]:
        return self._instance(instance_uuid, "shelve")

    def shelve_offload_instance(self, instance_uuid: str) -> list[str]:
        return self._instance(instance_uuid, "shelve_offload")

    def reclaim_soft_deleted(self, older_than: float | None = None) -> list[str]:
        return cast(list[str], self._result("POST", "/reclaim", {"older_than": older_than}))

    # -- reading ------------------------------------------------------------------------------

    def claims_for_instance(self, instance_uuid: str) -> list[Claim]:
        data = self._call("GET", "/claims", params={"instance_uuid": instance_uuid})
        return [self._claim(c) for c in data["claims"]]

    def claims_for_host(self, host: str) -> list[Claim]:
        data = self._call("GET", "/claims", params={"host": host})
        return [self._claim(c) for c in data["claims"]]

    def get_claim(self, claim_id: str) -> Claim:
        return self._claim(self._call("GET", f"/claims/{claim_id}"))

    def capacity(self) -> JSON:
        return cast(JSON, self._call("GET", "/capacity"))

    def host_snapshot(self) -> HostSnapshot:
        """The host's tree and its claims' usage, for ``berth.domain.host.snapshot.fits``."""
        return HostSnapshot.from_dict(self._call("GET", "/host"))

    def audit(self, heal: bool | None = None) -> JSON:
        return cast(JSON, self._call("POST", "/audit", {"heal": heal}))

    def update_available_resource(self) -> JSON:
        return cast(JSON, self._call("POST", "/sync"))

    # -- guests -------------------------------------------------------------------------------
    # Refusals come back as AgentError with a guest.* code (agent_error_codes).

    def guests(self) -> list[JSON]:
        """The guests the host's driver runs: ``{"uuid", "state", "claim_id", "resources"}`` each."""
        return cast(list[JSON], self._call("GET", "/guests")["guests"])

    def spawn_guest(self, instance_uuid: str, claim_id: str) -> JSON:
        """Start the instance's guest in its claim; a guest already running in it is answered as it is."""
        return cast(JSON, self._call("POST", f"/guests/{instance_uuid}", {"claim_id": claim_id}))

    def destroy_guest(self, instance_uuid: str) -> str:
        """``destroyed``, or ``absent`` when there was no guest."""
        return cast(str, self._result("DELETE", f"/guests/{instance_uuid}"))

    def migrate_guest(
        self, instance_uuid: str, *, destination_host: str | None = None, claim_id: str | None = None
    ) -> JSON:
        """On the source, the guest leaves for ``destination_host``; on the destination, it arrives
        in its incoming claim ``claim_id``."""
        body = {"destination_host": destination_host, "claim_id": claim_id}
        return cast(JSON, self._call("POST", f"/guests/{instance_uuid}/migrate", body))

    def set_faults(
        self,
        *,
        fail_next_spawns: int | None = None,
        spawn_failure_rate: float | None = None,
        seed: int | None = None,
        spawn_seconds: float | None = None,
    ) -> JSON:
        """Make the host's spawns fail, or take long (fake driver); the settings given replace the
        current ones."""
        given = {
            "fail_next_spawns": fail_next_spawns,
            "spawn_failure_rate": spawn_failure_rate,
            "seed": seed,
            "spawn_seconds": spawn_seconds,
        }
        body = {k: v for k, v in given.items() if v is not None}
        return cast(JSON, self._call("POST", "/faults", body)["faults"])

    def plant_guest(
        self, instance_uuid: str, *, state: str | None = None, resources: dict[str, int] | None = None
    ) -> JSON:
        """A fault (fake driver): a guest on the host in no claim, as if started outside the tracker,
        ``running`` unless ``state`` says ``stopped``; the guest planted."""
        given = {"state": state, "resources": resources}
        body = {k: v for k, v in given.items() if v is not None}
        return cast(JSON, self._call("POST", f"/faults/guests/{instance_uuid}", body))


def _claim_body(instance: InstanceSpec, preempted: Sequence[str], held: Allocations | None) -> JSON:
    body: dict[str, Any] = {"instance": instance.to_dict()}
    if preempted:
        body["preempted"] = list(preempted)
    if held is not None:
        body["held"] = held
    return body
