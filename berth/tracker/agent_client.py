"""A client for ``berth agent``: the tracker's methods, over HTTP, for a conductor elsewhere."""

from __future__ import annotations

import requests

from berth.tracker.claims import (
    Claim,
    ClaimError,
    ClaimFailed,
    ClaimNotFound,
    ClaimRecord,
    Flavor,
    InstanceSpec,
    InvalidRequest,
    NopClaim,
    SourceContext,
)

_ERRORS = {"claim.does_not_fit": ClaimFailed, "claim.not_found": ClaimNotFound, "claim.invalid_request": InvalidRequest}


class AgentError(ClaimError):
    def __init__(self, status, code, message, reasons=()):
        super().__init__(message, reasons=reasons)
        self.status = status
        self.code = code


class AgentClient:
    def __init__(self, url: str, *, token: str | None = None, timeout: float = 60.0):
        self.url = url.rstrip("/")
        self.session = requests.Session()
        self.timeout = timeout
        if token:
            self.session.headers["X-Auth-Token"] = token
        self._host = None

    @property
    def host(self) -> str:
        if self._host is None:
            self._host = self._call("GET", "/")["host"]
        return self._host

    def _call(self, method, path, body=None, params=None):
        response = self.session.request(method, self.url + path, json=body, params=params, timeout=self.timeout)
        data = response.json() if response.content else None
        if response.status_code >= 400:
            error = (data or {}).get("error", {})
            code, message, reasons = error.get("code"), error.get("message", response.text), error.get("reasons", [])
            if code == "claim.does_not_fit":
                raise ClaimFailed(reasons or [message])
            cls = _ERRORS.get(code)
            if cls is not None:
                raise cls(message, reasons=reasons)
            raise AgentError(response.status_code, code, message, reasons)
        return data

    def _claim(self, data) -> Claim:
        if data.get("claim_id") is None:
            return NopClaim(data["instance_uuid"], data["host"])
        return Claim(ClaimRecord.from_dict(data), self)

    # -- claims -------------------------------------------------------------------------------

    def instance_claim(self, instance: InstanceSpec) -> Claim:
        return self._claim(self._call("POST", "/claims/instance", {"instance": instance.to_dict()}))

    def unshelve_claim(self, instance: InstanceSpec) -> Claim:
        return self._claim(self._call("POST", "/claims/unshelve", {"instance": instance.to_dict()}))

    def resize_claim(
        self, instance: InstanceSpec, new_flavor: Flavor, migration_uuid: str, source: SourceContext
    ) -> Claim:
        return self._claim(
            self._call(
                "POST",
                "/claims/resize",
                {
                    "instance": instance.to_dict(),
                    "flavor": new_flavor.to_dict(),
                    "migration_uuid": migration_uuid,
                    "source": source.to_dict(),
                },
            )
        )

    def live_migration_claim(self, instance: InstanceSpec, migration_uuid: str, source: SourceContext) -> Claim:
        return self._claim(
            self._call(
                "POST",
                "/claims/live_migration",
                {"instance": instance.to_dict(), "migration_uuid": migration_uuid, "source": source.to_dict()},
            )
        )

    def evacuate_claim(self, instance: InstanceSpec, migration_uuid: str, source_host: str) -> Claim:
        return self._claim(
            self._call(
                "POST",
                "/claims/evacuate",
                {"instance": instance.to_dict(), "migration_uuid": migration_uuid, "source_host": source_host},
            )
        )

    def rebuild_claim(self, instance: InstanceSpec, migration_uuid=None, source_host=None) -> Claim:
        return self._claim(
            self._call(
                "POST",
                "/claims/rebuild",
                {"instance": instance.to_dict(), "migration_uuid": migration_uuid, "source_host": source_host},
            )
        )

    def abort(self, claim_id: str):
        return self._call("DELETE", f"/claims/{claim_id}")["result"]

    # -- moves --------------------------------------------------------------------------------

    def begin_move_out(self, instance_uuid: str, migration_uuid: str) -> SourceContext:
        return SourceContext.from_dict(
            self._call("POST", f"/migrations/{migration_uuid}/source", {"instance_uuid": instance_uuid})
        )

    def confirm_migration(self, migration_uuid: str) -> list:
        return self._call("POST", f"/migrations/{migration_uuid}/confirm")["result"]

    def revert_migration(self, migration_uuid: str) -> list:
        return self._call("POST", f"/migrations/{migration_uuid}/revert")["result"]

    def drop_move_claim(self, migration_uuid: str):
        return self._call("POST", f"/migrations/{migration_uuid}/drop")["result"]

    def cleanup_evacuated(self, instance_uuid: str, migration_uuid: str) -> list:
        return self._call("POST", f"/migrations/{migration_uuid}/cleanup_evacuated", {"instance_uuid": instance_uuid})[
            "result"
        ]

    # -- instance life cycle ------------------------------------------------------------------

    def _instance(self, instance_uuid, action):
        return self._call("POST", f"/instances/{instance_uuid}/{action}")["result"]

    def delete_instance(self, instance_uuid):
        return self._instance(instance_uuid, "delete")

    def soft_delete_instance(self, instance_uuid):
        return self._instance(instance_uuid, "soft_delete")

    def restore_instance(self, instance_uuid):
        return self._instance(instance_uuid, "restore")

    def shelve_instance(self, instance_uuid):
        return self._instance(instance_uuid, "shelve")

    def shelve_offload_instance(self, instance_uuid):
        return self._instance(instance_uuid, "shelve_offload")

    def reclaim_soft_deleted(self, older_than=None):
        return self._call("POST", "/reclaim", {"older_than": older_than})["result"]

    # -- reading ------------------------------------------------------------------------------

    def claims_for_instance(self, instance_uuid) -> list[Claim]:
        data = self._call("GET", "/claims", params={"instance_uuid": instance_uuid})
        return [Claim(ClaimRecord.from_dict(c), self) for c in data["claims"]]

    def claims_for_host(self, host) -> list[Claim]:
        data = self._call("GET", "/claims", params={"host": host})
        return [Claim(ClaimRecord.from_dict(c), self) for c in data["claims"]]

    def get_claim(self, claim_id) -> Claim:
        return Claim(ClaimRecord.from_dict(self._call("GET", f"/claims/{claim_id}")), self)

    def capacity(self) -> dict:
        return self._call("GET", "/capacity")

    def audit(self, heal=None) -> dict:
        return self._call("POST", "/audit", {"heal": heal})

    def update_available_resource(self) -> dict:
        return self._call("POST", "/sync")
