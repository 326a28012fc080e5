"""``berth agent``'s HTTP API: the tracker's claim operations for a conductor on another machine.

The tracker holds its lock in-process, so the agent runs exactly one worker process of the server
the services run on (Granian, started by ``berth agent``'s command), with a few threads; requests
queue on the lock. The periodic audit runs in a thread of that worker (``AgentWorker``).
JSON in, JSON out; errors are ``{"error": {"code", "message", "reasons"}}`` with 400 (bad request:
a body that does not fit its route's schema, ``berth.tracker.agent.schemas``), 404 (no such claim),
409 (refused, does not fit) or 503 (Placement unreachable).

    GET    /                                      host, root provider, driver
    GET    /capacity                              inventories, usage, NUMA cells, PCI slots
    GET    /host                                  the host's snapshot for schedulers (HostSnapshot)
    GET    /claims?instance_uuid=U | ?host=H      claims (default: all of this host)
    GET    /claims/<id>                           one claim
    DELETE /claims/<id>                           abort it (a claim already gone: 200, {"result": null})
    POST   /claims/{instance,resize,live_migration,evacuate,rebuild,unshelve}
                                                  (instance and unshelve: "preempted", the consumers
                                                  whose claims go first, tracker.drop_preempted;
                                                  "held", what the scheduler's claim wrote)
    POST   /migrations/<m>/{source,confirm,revert,drop,cleanup_evacuated}
    POST   /instances/<u>/{delete,soft_delete,restore,shelve,shelve_offload}
    POST   /reclaim  /audit  /sync
    GET    /guests                                the guests the driver runs
    POST   /guests/<u>                            spawn in {"claim_id"} (201; 200 when already running in it)
    DELETE /guests/<u>                            destroy (200 whether or not it was there)
    POST   /guests/<u>/migrate                    {"destination_host"}: leave (source);
                                                  {"claim_id"}: arrive in the incoming claim (destination)
    POST   /faults                                spawn failures on request (fake driver)
    POST   /faults/guests/<u>                     plant an orphan guest, in no claim: {"state", "resources"}
                                                  (201; fake driver)

Guest operations that are refused answer 409 (``guest.no_live_claim``, ``guest.conflict``); a spawn
the hypervisor failed 500 ``guest.spawn_failed``; a driver without a guest side 501.
"""

from __future__ import annotations

import hmac
import logging
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import orjson
from werkzeug.exceptions import HTTPException
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

from berth.clients import agent_error_codes, request_ids
from berth.clients.errors import ClaimError, InvalidRequest, PlacementError
from berth.domain.host.claims import ClaimHandle
from berth.domain.host.errors import HostModelError
from berth.domain.host.records import SourceContext
from berth.domain.host.request import Flavor, InstanceSpec
from berth.domain.request_ids import global_request_id
from berth.tracker import guests
from berth.tracker.agent import schemas
from berth.tracker.agent.registration import Registration
from berth.tracker.errors import GuestError, StoreError, claim_error
from berth.tracker.facts import RUNNING, STOPPED
from berth.tracker.tracker import ResourceTracker

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

LOG = logging.getLogger(__name__)

_URLS = Map(
    [
        Rule("/", endpoint="index", methods=["GET"]),
        Rule("/capacity", endpoint="capacity", methods=["GET"]),
        Rule("/host", endpoint="host", methods=["GET"]),
        Rule("/claims", endpoint="list_claims", methods=["GET"]),
        Rule("/claims/<claim_id>", endpoint="show_claim", methods=["GET"]),
        Rule("/claims/<claim_id>", endpoint="abort_claim", methods=["DELETE"]),
        Rule(
            "/claims/<any(instance, resize, live_migration, evacuate, rebuild, unshelve):kind>",
            endpoint="claim",
            methods=["POST"],
        ),
        Rule(
            "/migrations/<migration_uuid>/<any(source, confirm, revert, drop, cleanup_evacuated):action>",
            endpoint="migration",
            methods=["POST"],
        ),
        Rule(
            "/instances/<instance_uuid>/<any(delete, soft_delete, restore, shelve, shelve_offload):action>",
            endpoint="instance",
            methods=["POST"],
        ),
        Rule("/reclaim", endpoint="reclaim", methods=["POST"]),
        Rule("/audit", endpoint="audit", methods=["POST"]),
        Rule("/sync", endpoint="sync", methods=["POST"]),
        Rule("/guests", endpoint="list_guests", methods=["GET"]),
        Rule("/guests/<instance_uuid>", endpoint="spawn_guest", methods=["POST"]),
        Rule("/guests/<instance_uuid>", endpoint="destroy_guest", methods=["DELETE"]),
        Rule("/guests/<instance_uuid>/migrate", endpoint="migrate_guest", methods=["POST"]),
        Rule("/faults", endpoint="faults", methods=["POST"]),
        Rule("/faults/guests/<instance_uuid>", endpoint="plant_guest", methods=["POST"]),
    ]
)


def _json(body: object, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status=status, content_type="application/json")


def _error(status: int, code: str, message: str, reasons: Iterable[str] = ()) -> Response:
    return _json({"error": {"code": code, "message": message, "reasons": list(reasons)}}, status)


class AgentApp:
    def __init__(self, tracker: ResourceTracker, *, token: str | None = None, driver_name: str = ""):
        self.tracker = tracker
        self.token = token
        self.driver_name = driver_name

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        request = Request(environ)
        try:
            # The calls to the service made for the request carry the caller's global request id
            # (a conductor's), so that one request is followed through the agent into the service.
            with request_ids.carrying(global_request_id(request.headers.get(request_ids.HEADER))):
                response = self.dispatch(request)
        except ClaimError as e:
            response = _json({"error": e.to_dict()}, e.status)
        except GuestError as e:
            response = _json({"error": e.to_dict()}, e.status)
        except HostModelError as e:  # a request the host model could not read (a flavor, an instance)
            error = claim_error(e)
            response = _json({"error": error.to_dict()}, error.status)
        except PlacementError as e:
            LOG.warning("Placement error during %s %s: %s", request.method, request.path, e)
            response = _error(503 if e.status in (0, 503) else 502, agent_error_codes.PLACEMENT_ERROR, str(e))
        except HTTPException as e:
            response = _error(e.code or 500, agent_error_codes.HTTP_ERROR, e.description or e.name)
        except Exception:  # noqa: BLE001 - the agent answers, and logs, whatever went wrong
            LOG.exception("agent request %s %s failed", request.method, request.path)
            response = _error(500, agent_error_codes.INTERNAL, "internal error; see the agent's log")
        return response(environ, start_response)

    def dispatch(self, request: Request) -> Response:
        if self.token is not None and request.path != "/":
            given = request.headers.get("X-Auth-Token", "")
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                return _error(401, agent_error_codes.AUTH_REQUIRED, "a valid X-Auth-Token is required")
        adapter = _URLS.bind_to_environ(request.environ)
        endpoint, args = adapter.match()
        handler: Callable[..., Response] = getattr(self, f"on_{endpoint}")
        return handler(request, **args)

    @staticmethod
    def _body(request: Request) -> dict[str, Any]:
        raw = request.get_data(cache=True)  # whatever the Content-Type says (curl -d sends a form's)
        if not raw:
            return {}
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise InvalidRequest("the body is not JSON") from None
        if not isinstance(body, dict):
            raise InvalidRequest("the body must be a JSON object")
        return body

    @staticmethod
    def _need(body: dict[str, Any], *keys: str) -> list[Any]:
        missing = [k for k in keys if not body.get(k)]
        if missing:
            raise InvalidRequest(f"missing {', '.join(missing)}")
        return [body[k] for k in keys]

    @classmethod
    def _checked(cls, request: Request, schema: schemas.JsonSchema) -> dict[str, Any]:
        """The request's body, if it fits its route's schema (else a 400 naming what does not)."""
        body: dict[str, Any] = schemas.check(cls._body(request), schema)
        return body

    @staticmethod
    def _preempted(body: dict[str, Any]) -> list[str]:
        """A claim's ``preempted`` (checked by its schema): the consumers whose claims here go first
        (none when left out)."""
        return list(body.get("preempted") or [])

    # -- endpoints ----------------------------------------------------------------------------

    def on_index(self, request: Request) -> Response:
        tree = self.tracker.tree
        return _json(
            {
                "host": self.tracker.host,
                "driver": self.driver_name,
                "root_provider_uuid": tree.root.uuid if tree else None,
            }
        )

    def on_capacity(self, request: Request) -> Response:
        return _json(self.tracker.capacity())

    def on_host(self, request: Request) -> Response:
        return _json(self.tracker.host_snapshot().to_dict())

    def on_list_claims(self, request: Request) -> Response:
        if "instance_uuid" in request.args:
            claims = self.tracker.claims_for_instance(request.args["instance_uuid"])
        else:
            claims = self.tracker.claims_for_host(request.args.get("host", self.tracker.host))
        return _json({"claims": [c.to_dict() for c in claims]})

    def on_show_claim(self, request: Request, claim_id: str) -> Response:
        return _json(self.tracker.get_claim(claim_id).to_dict())

    def on_abort_claim(self, request: Request, claim_id: str) -> Response:
        # A claim already gone is answered 200 with a null result, as the tracker's own ``abort``
        # returns None: an abort is repeated safely (a conductor's retry after a lost answer, a claim
        # the audit released first), as every release is.
        return _json({"result": self.tracker.abort(claim_id)})

    def on_claim(self, request: Request, kind: str) -> Response:
        body = self._checked(request, schemas.CLAIMS[kind])
        instance = InstanceSpec.from_dict(self._need(body, "instance")[0])
        t = self.tracker
        claim: ClaimHandle
        if kind == "instance":
            claim = t.instance_claim(instance, self._preempted(body), body.get("held"))
        elif kind == "unshelve":
            claim = t.unshelve_claim(instance, self._preempted(body), body.get("held"))
        elif kind == "resize":
            migration, source, flavor = self._need(body, "migration_uuid", "source", "flavor")
            claim = t.resize_claim(instance, Flavor.from_dict(flavor), migration, SourceContext.from_dict(source))
        elif kind == "live_migration":
            migration, source = self._need(body, "migration_uuid", "source")
            claim = t.live_migration_claim(instance, migration, SourceContext.from_dict(source))
        elif kind == "evacuate":
            migration, source_host = self._need(body, "migration_uuid", "source_host")
            claim = t.evacuate_claim(instance, migration, source_host)
        else:
            claim = t.rebuild_claim(instance, body.get("migration_uuid"), body.get("source_host"))
        return _json(claim.to_dict(), 201 if claim.claim_id else 200)

    def on_migration(self, request: Request, migration_uuid: str, action: str) -> Response:
        t = self.tracker
        if action == "source":
            (instance_uuid,) = self._need(self._checked(request, schemas.MIGRATION_INSTANCE), "instance_uuid")
            return _json(t.begin_move_out(instance_uuid, migration_uuid).to_dict())
        if action in ("confirm", "revert", "drop"):
            self._checked(request, schemas.NO_BODY)
        if action == "confirm":
            return _json({"result": t.confirm_migration(migration_uuid)})
        if action == "revert":
            return _json({"result": t.revert_migration(migration_uuid)})
        if action == "drop":
            return _json({"result": t.drop_move_claim(migration_uuid)})
        (instance_uuid,) = self._need(self._checked(request, schemas.MIGRATION_INSTANCE), "instance_uuid")
        return _json({"result": t.cleanup_evacuated(instance_uuid, migration_uuid)})

    def on_instance(self, request: Request, instance_uuid: str, action: str) -> Response:
        self._checked(request, schemas.NO_BODY)
        t = self.tracker
        operations: dict[str, Callable[[str], list[Any]]] = {
            "delete": t.delete_instance,
            "soft_delete": t.soft_delete_instance,
            "restore": t.restore_instance,
            "shelve": t.shelve_instance,
            "shelve_offload": t.shelve_offload_instance,
        }
        result = operations[action](instance_uuid)
        return _json({"result": [r.to_dict() if isinstance(r, ClaimHandle) else r for r in result]})

    def on_reclaim(self, request: Request) -> Response:
        older_than = self._checked(request, schemas.RECLAIM).get("older_than")
        return _json({"result": self.tracker.reclaim_soft_deleted(older_than)})

    def on_audit(self, request: Request) -> Response:
        heal = self._checked(request, schemas.AUDIT).get("heal")
        return _json(self.tracker.audit(heal=heal).to_dict())

    def on_sync(self, request: Request) -> Response:
        self._checked(request, schemas.NO_BODY)
        return _json(self.tracker.update_available_resource().to_dict())

    # -- guests ---------------------------------------------------------------------------------

    def on_list_guests(self, request: Request) -> Response:
        return _json({"guests": [g.to_dict() for g in guests.guests(self.tracker)]})

    def on_spawn_guest(self, request: Request, instance_uuid: str) -> Response:
        (claim_id,) = self._need(self._checked(request, schemas.SPAWN_GUEST), "claim_id")
        guest, created = guests.spawn(self.tracker, instance_uuid, claim_id)
        return _json(guest.to_dict(), 201 if created else 200)

    def on_destroy_guest(self, request: Request, instance_uuid: str) -> Response:
        found = guests.destroy(self.tracker, instance_uuid)
        return _json({"result": "destroyed" if found else "absent"})

    def on_migrate_guest(self, request: Request, instance_uuid: str) -> Response:
        body = self._checked(request, schemas.MIGRATE_GUEST)
        destination, claim_id = body.get("destination_host"), body.get("claim_id")
        if bool(destination) == bool(claim_id):
            raise InvalidRequest("give destination_host (on the source) or claim_id (on the destination)")
        if destination:
            left = guests.migrate_out(self.tracker, instance_uuid, str(destination))
            return _json({"result": "migrated" if left else "absent", "destination_host": destination})
        guest, created = guests.accept_migration(self.tracker, instance_uuid, str(claim_id))
        return _json(guest.to_dict(), 201 if created else 200)

    def on_faults(self, request: Request) -> Response:
        try:
            return _json({"faults": guests.set_faults(self.tracker, self._body(request))})
        except ValueError as e:
            raise InvalidRequest(str(e)) from None

    def on_plant_guest(self, request: Request, instance_uuid: str) -> Response:
        body = self._body(request)
        unknown = sorted(set(body) - {"state", "resources"})
        if unknown:
            raise InvalidRequest(f"unknown keys: {', '.join(unknown)} (known: state, resources)")
        state = body.get("state", RUNNING)
        if state not in (RUNNING, STOPPED):
            raise InvalidRequest(f"state is {RUNNING} or {STOPPED}, not {state!r}")
        resources = body.get("resources")
        if resources is not None and not (
            isinstance(resources, dict)
            and all(
                isinstance(amount, int) and not isinstance(amount, bool) and amount >= 0
                for amount in resources.values()
            )
        ):
            raise InvalidRequest("resources maps resource classes to whole numbers >= 0")
        guest = guests.plant(self.tracker, instance_uuid, state=state, resources=resources)
        return _json(guest.to_dict(), 201)


class PeriodicTask:
    """Runs ``fn`` every ``interval`` seconds in a daemon thread until stopped."""

    def __init__(self, fn: Callable[[], object], interval: float, name: str = "berth-audit"):
        self.fn = fn
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> PeriodicTask:
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                result = self.fn()
                audit = result.get("audit", {}) if isinstance(result, dict) else {}
                if audit.get("findings"):
                    LOG.warning("audit findings: %s", audit["findings"])
            except PlacementError as e:
                # The service away (restarted, unreachable): one line a round, not a traceback.
                LOG.warning("periodic task failed: %s; trying again in %g s", e, self.interval)
            except Exception:  # noqa: BLE001 - the next round tries again
                LOG.exception("periodic task failed")


class AgentWorker:
    """What the agent's one worker process holds: its tracker, its periodic audit, its registration
    with the conductors, and the WSGI application. The server (``berth agent``'s command: the services'
    own) calls ``load`` in the worker and ``exit`` when the worker stops."""

    def __init__(
        self,
        build_tracker: Callable[[], ResourceTracker],
        *,
        token: str | None,
        driver_name: str,
        audit_interval: float,
        registration: Registration | None = None,
    ):
        self.build_tracker = build_tracker
        self.registration = registration
        self.token = token
        self.driver_name = driver_name
        self.audit_interval = audit_interval
        self.tracker: ResourceTracker | None = None
        self.periodic: PeriodicTask | None = None

    def load(self) -> AgentApp:
        try:
            tracker = self.tracker = self.build_tracker()
        except StoreError as e:
            # Nothing can be served without the host's claims: one line says why and what to do, and the
            # worker ends (the server gives up on a second failure, and ``berth agent`` exits with 1).
            LOG.error("berth agent: %s", e)
            raise SystemExit(1) from None
        started = tracker.start()
        LOG.info(
            "agent for %s started: %d providers, %d claims, %d operations recovered, %d evacuations cleaned up",
            tracker.host,
            len(tracker.require_tree()),
            len(tracker.store.all()),
            len(started["recovered"]),
            len(started["evacuations"]),
        )
        if self.audit_interval > 0:
            self.periodic = PeriodicTask(tracker.periodic, self.audit_interval).start()
        if self.registration is not None:  # the host is reported: the conductors may send it work
            self.registration.start()
        return AgentApp(tracker, token=self.token, driver_name=self.driver_name)

    def exit(self) -> None:
        if self.registration is not None:
            self.registration.close()
        if self.periodic is not None:
            self.periodic.stop()
        if self.tracker is not None:
            self.tracker.close()
