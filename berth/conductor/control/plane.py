"""``ControlPlane``: one conductor process's part of the control plane. It keeps the journal with
its records (servers, flavors, server groups, hosts) in one database shared by every conductor,
starts each action in the background and answers with its journaled operation, takes over the
operations of conductors that died, cleans up after evacuations once their source is back, and ends
the servers the service's record says were preempted and still run (``control.preemptions``).

Any conductor may take any request: what one conductor knows of another is in the database alone.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from berth.clients.errors import ClientError
from berth.clients.http import TransportError
from berth.clients.placement import PlacementClient
from berth.conductor.conductor import Conductor
from berth.conductor.control import actions, host_books, preemptions
from berth.conductor.control.agents import RegisteredAgents
from berth.conductor.control.background import Background
from berth.conductor.errors import (
    HOST_DOWN,
    HOST_IN_USE,
    HOST_NOT_REPORTED,
    HOST_UP,
    SERVER_NO_VALID_HOST,
    ZONE_NOT_FOUND,
    ConductorError,
    Refused,
    ServerBusy,
)
from berth.conductor.journal import DONE, RUNNING, Journal, Operation
from berth.conductor.operations import build, delete, evacuation, lifecycle
from berth.conductor.records import server_states
from berth.conductor.records.flavors import Flavors, to_flavor
from berth.conductor.records.hosts import Host, HostEntry, Hosts
from berth.conductor.records.server_groups import ServerGroups
from berth.conductor.records.servers import ServerFilter, ServerRecords
from berth.conductor.records.tables import Record
from berth.conductor.requests import ServerRequest
from berth.conductor.runner import ConductorConfig, StepHook
from berth.domain.errors import BadRequest, Conflict, Forbidden, NotFound
from berth.scheduler.explain import NoValidHost as SchedulerNoValidHost
from berth.scheduler.request.flavor import Image, SchedulerConfig
from berth.scheduler.request.request_spec import DISABLED_TRAIT, RequestSpec
from berth.scheduler.request.server_group import ServerGroup
from berth.scheduler.selection import Selection
from berth.scheduler.service import QuotaExceeded
from berth.scheduler.settings import SelectionSettings

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class ControlSettings:
    # A host whose agent has not beaten for this long is down.
    host_down_after: float = 60.0
    # Operations one conductor process runs at once.
    operation_threads: int = 32
    # Seconds between looks for dead conductors' operations and evacuated hosts that are back.
    housekeeping_interval: float = 10.0


@dataclass(frozen=True)
class Who:
    """The caller a server is made for."""

    project_id: str
    user_id: str


class ControlPlane:
    def __init__(
        self,
        database_url: str,
        placement: PlacementClient,
        *,
        scheduler_config: SchedulerConfig | None = None,
        conductor_config: ConductorConfig | None = None,
        selection: SelectionSettings | None = None,
        settings: ControlSettings | None = None,
        owner: str | None = None,
        hook: StepHook | None = None,
    ):
        self.settings = settings or ControlSettings()
        self.placement = placement
        self.journal = Journal(database_url)
        engine = self.journal.engine
        self.servers = ServerRecords(engine)
        self.journal.companions.append(self.servers)
        self.hosts = Hosts(engine, self.settings.host_down_after)
        self.zones = host_books.ZoneAggregates(self.hosts)
        unknown_hosts = host_books.UnknownHosts(self.hosts, placement)
        self.scheduler_config = replace(
            scheduler_config or SchedulerConfig(),
            availability_zones=self.zones,
            hosts_down=host_books.DownHosts(self.hosts),
            unknown_hosts=unknown_hosts,
        )
        self.flavors = Flavors(engine, self.scheduler_config)
        self.groups = ServerGroups(engine, self.servers)
        self.conductor = Conductor(
            placement,
            self.journal,
            agents=RegisteredAgents(self.hosts),
            scheduler_config=self.scheduler_config,
            settings=selection,
            config=conductor_config,
            owner=owner,
            hook=hook,
        )
        # The compute nodes read for the scheduler name the roots an operation finds its server's
        # host by (ServiceCalls.host_of), which would otherwise read each one it meets.
        unknown_hosts.on_nodes = self.conductor.runner.calls.learn_hosts
        self.conductor.runner.victims = preemptions.RecordedServers(self.servers)
        self.preemptions = preemptions.Preemptions(placement, self.servers, self.conductor.runner)
        self.background = Background(self.conductor.runner, self.settings.operation_threads)
        self._stop = threading.Event()
        self._housekeeper: threading.Thread | None = None
        # (host, zone) pairs whose aggregate this process has set in the service.
        self._joined: set[tuple[str, str | None]] = set()
        # (host, zone) pairs whose aggregate waits for the host's compute node.
        self._waiting: set[tuple[str, str | None]] = set()

    # -- life -------------------------------------------------------------------------------------

    def start(self) -> None:
        self.conductor.start()
        self._housekeeper = threading.Thread(target=self._keep_house, name="conductor-housekeeping", daemon=True)
        self._housekeeper.start()

    def close(self) -> None:
        self._stop.set()
        if self._housekeeper is not None:
            self._housekeeper.join(timeout=5)
        self.background.close()
        self.conductor.close()
        self.journal.close()

    def _keep_house(self) -> None:
        while not self._stop.wait(self.settings.housekeeping_interval):
            try:
                self.conductor.resume()
                self.clean_up_evacuated()
                self.preemptions.reconcile()
            except (ClientError, TransportError) as e:
                # The service (or an agent) away: one line a round, not a traceback every second.
                LOG.warning("housekeeping failed: %s; trying again in %s s", e, self.settings.housekeeping_interval)
            except Exception:  # noqa: BLE001 - the next round tries again
                LOG.exception("housekeeping failed; trying again in %s s", self.settings.housekeeping_interval)

    # -- servers ----------------------------------------------------------------------------------

    def create_servers(
        self,
        who: Who,
        *,
        name: str,
        flavor_ref: str,
        image_properties: Mapping[str, str] | None = None,
        metadata: Mapping[str, str] | None = None,
        zone: str | None = None,
        group_id: str | None = None,
        count: int = 1,
        min_count: int | None = None,
    ) -> list[Operation]:
        """``count`` servers (at least ``min_count``), each one build started; the builds as
        journaled (their ids are the servers'). One server is one build that selects its host in its
        own ``schedule`` step. Several are a gang the scheduler places first, before any build is
        journaled, under leases: at least ``min_count`` of them (all by default) or none. Refused,
        nothing is left (no server, no operation, no allocation) and ``Conflict`` says how many could
        be placed and why; placed, one build per server placed, each carrying its destination."""
        flavor = to_flavor(self.flavors.get(flavor_ref))
        if zone is not None:
            self.check_zone(zone)
        group = self.groups.scheduling(group_id) if group_id else None
        if min_count is not None and not 1 <= min_count <= count:
            raise BadRequest(f"min_count ({min_count}) must be between 1 and the count ({count}).")

        def server(instance: str, index: int, members: frozenset[str] = frozenset()) -> ServerRequest:
            return ServerRequest(
                instance,
                flavor,
                who.project_id,
                who.user_id,
                Image(dict(image_properties or {})),
                zone,
                None if group is None else replace(group, members=group.members | members),
                name if count == 1 else f"{name}-{index + 1}",
                dict(metadata or {}),
            )

        if count == 1:
            only = server(str(uuid.uuid4()), 0)
            return [self._start(lambda runner: build.build(runner, only))]
        instances = [str(uuid.uuid4()) for _ in range(count)]
        selections = self._place_gang(server(instances[0], 0).spec(self.scheduler_config), group, instances, min_count)
        placed = frozenset(s.instance_uuid for s in selections)
        started = []
        for position, selection in enumerate(selections):
            one = server(selection.instance_uuid, instances.index(selection.instance_uuid), placed)
            try:
                started.append(
                    self._start(
                        lambda runner, s=one, d=selection.destination, v=selection.preempted: build.build(  # type: ignore[misc]
                            runner, s, destination=d, preempted=v
                        )
                    )
                )
            except BaseException:
                # The builds not journaled leave nothing: their leased allocations are given back.
                for rest in selections[position:]:
                    self.conductor.runner.calls.release_lease(rest.instance_uuid)
                    self.conductor.runner.calls.release(rest.instance_uuid)
                raise
        return started

    def check_zone(self, zone: str) -> None:
        """BadRequest unless some registered host is in the zone a server asks for."""
        if zone not in self.scheduler_config.availability_zones:
            if ":" in zone:
                # Nova's "zone:host" (and "zone::node") forces a host past the scheduler; Berth's
                # scheduler always chooses, through the service's claims.
                raise BadRequest(
                    f"The availability zone {zone!r} names a host: Berth's scheduler chooses every host "
                    "(Nova's forced 'zone:host' is not taken); name the zone alone.",
                    code=ZONE_NOT_FOUND,
                )
            raise BadRequest(f"No host has registered in the availability zone {zone!r}.", code=ZONE_NOT_FOUND)

    def _place_gang(
        self, spec: RequestSpec, group: ServerGroup | None, instances: list[str], min_count: int | None
    ) -> list[Selection]:
        """The gang's hosts, claimed under leases the builds then confirm; ``Conflict`` when fewer than
        ``min_count`` (all, by default) can be placed, with nothing claimed."""
        try:
            return self.conductor.runner.selector.select_destinations(
                spec,
                len(instances),
                0,
                server_group=group,
                instance_uuids=instances,
                min_count=min_count,
                lease_seconds=self.conductor.runner.config.lease_seconds,
            )
        except SchedulerNoValidHost as e:
            least = len(instances) if min_count is None else min_count
            raise Conflict(
                f"None of the {len(instances)} servers was created: fewer than {least} can be placed. {e}",
                code=SERVER_NO_VALID_HOST,
            ) from None
        except QuotaExceeded as e:
            # As Nova answers a create over quota: 403, nothing created.
            raise Forbidden(f"None of the {len(instances)} servers was created: {e.detail}", code=e.code) from None

    def server_request(self, row: Record) -> ServerRequest:
        """The server as the scheduler and its host take it, with its group's members as they are now."""
        server = ServerRequest.from_dict(row["request"])
        if row["group_id"]:
            try:
                server = replace(server, server_group=self.groups.scheduling(str(row["group_id"])))
            except NotFound:
                # Its group deleted as it joined, before a delete had to count it (no longer
                # possible: ``ServerGroups.delete``): the group as its request recorded it, so that
                # the server can still be acted on, deleted included.
                LOG.warning("server %s names group %s, which is gone", row["id"], row["group_id"])
        return server

    def act(
        self, server_id: str, action: str, args: Mapping[str, Any] | None = None, *, row: Record | None = None
    ) -> Operation:
        """One of ``actions.ACTIONS`` started on the server; ``row``: the server's row as the caller
        read it just now (the operation's start checks its state again, atomically)."""
        kind, make = actions.ACTIONS[action]
        if row is None:
            row = self.servers.get(server_id)
        self.check_action(row, action)
        if kind == evacuation.KIND:
            self._refuse_up_host(row)
        elif row["host"] is not None and not self._host_up(str(row["host"])):
            if kind not in (delete.KIND, lifecycle.SHELVE_OFFLOAD):
                raise Conflict(
                    f"Host {row['host']} of server {row['id']} is down (its agent has sent no heartbeat for "
                    f"{self.settings.host_down_after:g} s): evacuate the server (ACTIVE or ERROR), shelve-offload it "
                    "(SHELVED) or delete it, which do without the host, or wait until the host is back.",
                    code=HOST_DOWN,
                )
            # As Nova deletes a server on a host that is down, without asking the host
            # (``operations.delete``); an offload likewise (``operations.lifecycle``).
            args = {**(args or {}), "host_down": True}
        work = make(row, self.server_request(row), args or {})
        return self._start(work)

    def check_action(self, row: Record, action: str) -> None:
        """Refused at once (409) while another operation runs on the server, or when its state does
        not allow the action; the operation's start checks both again, atomically."""
        if row["operation_id"] is not None:
            raise ServerBusy(
                f"Server {row['id']} is busy with operation {row['operation_id']}; wait for it to end and ask again."
            )
        actions.check_state(row, actions.ACTIONS[action][0])

    def delete(self, server_id: str, *, row: Record | None = None) -> Operation:
        return self.act(server_id, "forceDelete", row=row)

    def _host_up(self, host: str) -> bool:
        try:
            return self.hosts.get(host).up
        except NotFound:
            return False

    def _refuse_up_host(self, row: Record) -> None:
        host = row["host"]
        if host is None:
            return
        if self._host_up(str(host)):
            raise Conflict(
                f"Host {host} of server {row['id']} is up; evacuate only the servers of a host that is down "
                "(migrate or live-migrate the others).",
                code=HOST_UP,
            )

    def evacuate_host(self, host_name: str) -> tuple[list[Operation], dict[str, str]]:
        """Every server of a host that is down, evacuated: the operations started, and why each
        server left there was (busy with an operation, or in no state to move), by its id."""
        host = self.hosts.get(host_name)
        if host.up:
            raise Conflict(f"Host {host_name} is up; only a host that is down is evacuated.", code=HOST_UP)
        started = []
        left = {}
        for row in self.servers.all(ServerFilter(host=host_name)):
            try:
                started.append(self.act(str(row["id"]), "evacuate"))
            except (Conflict, ConductorError) as e:
                LOG.info("evacuation of %s from %s not started: %s", row["id"], host_name, e)
                left[str(row["id"])] = str(e)
        return started, left

    def _start(self, work: actions.Work) -> Operation:
        try:
            return self.background.start(work)
        except ConductorError as e:
            raise Refused(str(e)) from None

    # -- hosts ------------------------------------------------------------------------------------

    def register_host(
        self,
        name: str,
        url: str,
        zone: str | None,
        agent_token: str | None,
        user_id: str,
        *,
        admin: bool,
        agent_id: str | None = None,
    ) -> Host:
        # The zone it was in, which it leaves (no other host may be left in it to name it).
        previous = self.hosts.zones_of([name]).get(name)
        host, changed = self.hosts.register(name, url, zone, agent_token, user_id, admin=admin, agent_id=agent_id)
        if changed:
            self.zones.forget()
        if (name, zone) not in self._joined:
            try:
                every_zone = self.hosts.zones() | ({previous} if previous else set())
                host_books.join_zone(self.placement, name, zone, every_zone)
                # Joined this zone, it is in no other: a move back to one it was in joins it again.
                self._joined = {(n, z) for n, z in self._joined if n != name} | {(name, zone)}
                self._waiting.discard((name, zone))
            except host_books.HostNotReported:
                self._waiting.add((name, zone))
                LOG.info("host %s registered before its compute node was reported; its zone waits", name)
        return host

    def register_hosts(
        self, entries: Mapping[str, HostEntry], user_id: str, *, admin: bool
    ) -> tuple[set[str], list[Host]]:
        """Many registrations at once (a host pool beating for its hosts): those that change nothing
        are one heartbeat in one statement, whatever their number, where one ``register_host`` each
        would read and write every row apart and look up its zone in the service; the others are
        registered one by one. The names only beaten, and the hosts registered."""
        maybe_same = {n: e for n, e in entries.items() if (n, e.zone) not in self._waiting}
        beaten = self.hosts.beat_unchanged(maybe_same, user_id, admin=admin)
        registered = [
            self.register_host(name, e.url, e.zone, e.agent_token, user_id, admin=admin, agent_id=e.agent_id)
            for name, e in entries.items()
            if name not in beaten
        ]
        return beaten, registered

    def retire_host(self, name: str, user_id: str, *, admin: bool) -> None:
        """The host forgotten; refused while a server is on it, or while an operation in flight is
        placing one there or moving one from it (a build's server names its host only once it is
        built: a host retired under a landing build would have a server on a host nobody knows)."""
        busy = sorted(
            op.id for op in self.journal.running() if op.kind not in server_states.SLOTLESS and name in _hosts_named(op)
        )
        if busy:
            raise Conflict(
                f"Host {name} is the host of operation(s) in flight ({', '.join(busy)}); retire it once they end.",
                code=HOST_IN_USE,
            )
        was_disabled = self.hosts.get(name).disabled
        self.hosts.retire(name, user_id, admin=admin)
        if was_disabled:
            # Forgotten, its disabling goes too: registered again (its agent still running, or back
            # later), the host is enabled, and its compute node must not keep the trait that kept
            # the scheduler away (it was shown enabled and nothing landed there).
            try:
                host_books.set_disabled(self.placement, name, False)
            except host_books.HostNotReported:
                pass
            except ClientError as e:
                LOG.warning(
                    "host %s retired, but the service kept its %s trait (%s): `berth host enable %s` once it "
                    "registers again",
                    name,
                    DISABLED_TRAIT,
                    e,
                    name,
                )
        # The servers evacuated from it whose clean-up waited for it to come back: it will not, and
        # the books release what they still count against it (it stayed counted for ever).
        for evacuated in self._evacuations_waiting(books_released=True):
            if evacuated.request.get("source") == name:
                evacuation.forget_retired_source(self.conductor.runner, evacuated)

    def set_host_disabled(self, name: str, disabled: bool, reason: str | None = None) -> Host:
        self.hosts.get(name)
        try:
            host_books.set_disabled(self.placement, name, disabled)
        except host_books.HostNotReported:
            raise Conflict(
                f"Host {name} has no compute node in the service yet (its agent registered before reporting "
                "it): nothing to disable or enable there; ask again once its agent has reported it.",
                code=HOST_NOT_REPORTED,
            ) from None
        return self.hosts.set_disabled(name, disabled, reason)

    # -- evacuations' clean-up ----------------------------------------------------------------------

    def _evacuations_waiting(self, *, books_released: bool) -> list[Operation]:
        """The evacuations done whose source has not been cleaned up (nor is being): with
        ``books_released``, those whose books were released when their source was retired are left
        out too; without, they stay (the host, should it come back, still has the old guest)."""
        handled = {
            str(op.request.get("evacuation"))
            for op in self.journal.find(kind=evacuation.CLEANUP)
            if op.state in (DONE, RUNNING) and (books_released or not op.request.get(evacuation.RETIRED))
        }
        return [done for done in self.journal.find(kind=evacuation.KIND, state=DONE) if done.id not in handled]

    def clean_up_evacuated(self) -> int:
        """The old guest and claims of each server evacuated from a host that is up again, removed
        there; the number cleaned up."""
        waiting = self._evacuations_waiting(books_released=False)
        # The hosts read only when some evacuation waits (this runs at every round of housekeeping).
        up = {h.name for h in self.hosts.all() if h.up} if waiting else set()
        cleaned = 0
        for done in waiting:
            if done.request.get("source") not in up:
                continue
            try:
                self.conductor.clean_up_evacuated(done.id)
                cleaned += 1
            except Exception as e:  # noqa: BLE001 - tried again at the next round
                LOG.warning("clean-up after evacuation %s failed (tried again later): %s", done.id, e)
        return cleaned


def _hosts_named(operation: Operation) -> set[str]:
    """Every host an operation names: where it places the server (its destinations, chosen or
    tried) and where it takes it from."""
    selections, request = operation.selections, operation.request
    named = {selections.get("host"), selections.get("dest"), request.get("host"), request.get("source")}
    named.update(str(d.get("host")) for d in selections.get("destinations") or () if isinstance(d, dict))
    return {str(n) for n in named if n}
