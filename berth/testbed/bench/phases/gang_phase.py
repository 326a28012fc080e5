"""Phase 7: gangs (``POST /berth/pick`` with ``consumers``), after the pick-and-claim phase.

1. The hosts get a rack and a zone as aggregates (:func:`add_racks_and_zones`): racks of
   ``RACK_HOSTS`` hosts in order, the racks dealt over ``ZONES`` zones in turn. They are added
   here, after the other phases, so that those measure the layout they always did.
2. For each gang size, ``gang_clients`` threads post gangs of the pick phase's flavor for
   ``gang_seconds``, four runs: plain gangs, gangs ``within`` one rack (every rack named), gangs
   ``spread_over`` the zones (``max_skew`` ``MAX_SKEW``), and anti-affinity gangs (each gang its
   own server group). A placement is a member placed; the latency is one gang's request.
3. After each run, the checks: no over-commit on any provider placed on and usages equal to the
   baseline plus every member accepted (:mod:`.placement_checks`), then, from the answers' hosts
   (which the usages just matched), every anti-affinity gang on hosts of its own, every ``within``
   gang in one rack, every ``spread_over`` gang's counts over the zones within ``MAX_SKEW``.

The phase starts from the cloud as the preload left it (the pick phase's consumers released) and
keeps its own members until it ends: each run adds to what the runs before placed.
"""

from __future__ import annotations

import threading
import time
import uuid as uuidlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from berth.domain import error_codes
from berth.testbed.bench import log
from berth.testbed.bench.cloud import BENCH_PROJECT, BENCH_USER
from berth.testbed.bench.phases.pick_phase import summary
from berth.testbed.bench.phases.placement_checks import add_placements, check_over_commit
from berth.testbed.bench.phases.placing import FLAVOR_RESOURCES, Placement, PlacementTally, release_consumers
from berth.testbed.client import Client, error_code
from berth.testbed.errors import ApiError
from berth.testbed.parallel import Stop, parallel

RACK_HOSTS: Final = 40
ZONES: Final = 3
MAX_SKEW: Final = 1
GANG_KINDS: Final = ("plain", "within", "spread_over", "anti_affinity")
FULL_PAUSE: Final = 0.05  # seconds a thread waits after a gang found no room
SAMPLES: Final = 10


def rack_of(i: int) -> int:
    """The rack of host ``cn-{i}``."""
    return i // RACK_HOSTS


def rack_count(hosts: int) -> int:
    return -(-hosts // RACK_HOSTS)


def zone_of(i: int, hosts: int) -> int:
    """The zone of host ``cn-{i}``: its rack's, the racks dealt over the zones in turn (fewer zones
    than ``ZONES`` when there are fewer racks)."""
    return rack_of(i) % min(ZONES, rack_count(hosts))


class Topology:
    """The racks and zones of the hosts, as aggregate uuids."""

    def __init__(self, hosts: Sequence[str]):
        count = len(hosts)
        self.racks = [str(uuidlib.uuid4()) for _ in range(rack_count(count))]
        self.zones = [str(uuidlib.uuid4()) for _ in range(min(ZONES, len(self.racks)))]
        self.rack_of = {host: self.racks[rack_of(i)] for i, host in enumerate(hosts)}
        self.zone_of = {host: self.zones[zone_of(i, count)] for i, host in enumerate(hosts)}


def add_racks_and_zones(client: Client, topology: Topology, threads: int, stop: Stop) -> float:
    """Put each host in its rack and zone, beside the aggregates it has; the seconds it took."""

    def add(host: str) -> None:
        for _ in range(5):
            held = client.call("GET", f"/resource_providers/{host}/aggregates")
            body = {
                "resource_provider_generation": held["resource_provider_generation"],
                "aggregates": [*held["aggregates"], topology.rack_of[host], topology.zone_of[host]],
            }
            r = client.request("PUT", f"/resource_providers/{host}/aggregates", body)
            if r.status_code == 200:
                return
            if r.status_code != 409:
                break
        raise ApiError("PUT", f"/resource_providers/{host}/aggregates", r.status_code, r.text)

    started = time.perf_counter()
    hosts = list(topology.rack_of)
    parallel(
        hosts,
        threads,
        add,
        stop,
        client=client,
        progress=lambda done: log(f"  hosts in racks and zones: {done}/{len(hosts)}"),
    )
    return time.perf_counter() - started


class GangTally(PlacementTally):
    """A thread's gangs: ``placements`` counts members, the latency is one per gang."""

    def __init__(self) -> None:
        super().__init__()
        self.counts["gangs"] = 0

    def place_gang(self, members: list[Placement], started: float) -> None:
        self.counts["gangs"] += 1
        self.counts["placements"] += len(members)
        self.latency_ms.append((time.perf_counter() - started) * 1000)
        self.placed.extend(members)


class GangPlacer:
    """Posts gangs of ``size`` of one ``kind``."""

    def __init__(self, client: Client, topology: Topology, size: int, kind: str):
        self.client = client
        self.topology = topology
        self.size = size
        self.kind = kind

    def body(self, consumers: list[str], gang: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "query": {"resources": FLAVOR_RESOURCES},
            "consumers": [
                {"uuid": consumer, "project_id": BENCH_PROJECT, "user_id": BENCH_USER, "consumer_type": "INSTANCE"}
                for consumer in consumers
            ],
        }
        if self.kind == "within":
            body["topology"] = {"within": self.topology.racks}
        elif self.kind == "spread_over":
            body["topology"] = {"spread_over": self.topology.zones, "max_skew": MAX_SKEW}
        elif self.kind == "anti_affinity":
            body["server_group"] = {"uuid": gang, "policy": "anti-affinity"}
        return body

    def place(self, tally: GangTally) -> None:
        """One gang."""
        consumers = [str(uuidlib.uuid4()) for _ in range(self.size)]
        gang = str(uuidlib.uuid4())
        started = time.perf_counter()
        r = self.client.request("POST", "/berth/pick", self.body(consumers, gang))
        tally.counts["requests"] += 1
        if r.status_code == 200:
            members = []
            for member in r.json()["members"]:
                allocations = {rp: a["resources"] for rp, a in member["allocation_request"]["allocations"].items()}
                members.append(Placement(member["consumer_uuid"], allocations, member["root_provider_uuid"], gang))
            tally.place_gang(members, started)
        elif r.status_code == 409 and error_code(r) == error_codes.PICK_GANG_NO_VALID_HOST:
            tally.counts["no_valid_host"] += 1
            time.sleep(FULL_PAUSE)
        elif r.status_code == 409:
            tally.conflict(r)
        else:
            tally.error(f"POST /berth/pick (gang of {self.size}, {self.kind}) -> HTTP {r.status_code}: {r.text[:300]}")


def place_gangs(placer: GangPlacer, clients: int, seconds: float, stop: Stop) -> tuple[GangTally, float]:
    """``clients`` threads posting gangs for ``seconds``; the merged tally and the time."""
    lock = threading.Lock()
    total = GangTally()
    deadline = time.monotonic() + seconds

    def worker(_: int) -> None:
        mine = GangTally()
        try:
            while time.monotonic() < deadline and not stop:
                placer.place(mine)
        finally:
            with lock:
                total.merge(mine)

    started = time.perf_counter()
    parallel(range(clients), clients, worker, stop, client=placer.client, name=f"gangs-{placer.kind}")
    return total, time.perf_counter() - started


def gang_violations(
    kind: str,
    members: Sequence[Placement],
    rack_of: Mapping[str, str],
    zone_of: Mapping[str, str],
    zones: Sequence[str],
) -> dict[str, Any]:
    """What the members of each gang (``Placement.group``) break of their kind's rule, by the host
    each was placed on: anti-affinity, a member on a host holding another of its gang; ``within``,
    a gang over more than one rack; ``spread_over``, a gang whose counts over ``zones`` (every one
    counted) differ by more than ``MAX_SKEW``. Other kinds have no rule."""
    hosts: dict[str | None, list[str]] = {}
    for member in members:
        hosts.setdefault(member.group, []).append(member.host)
    rule: Callable[[list[str]], dict[str, Any] | None] = {
        "anti_affinity": _anti_affinity,
        "within": lambda on: _within(on, rack_of),
        "spread_over": lambda on: _skew(on, zone_of, zones),
    }.get(kind, lambda on: None)
    samples = []
    for gang, on in hosts.items():
        broken = rule(on)
        if broken is not None:
            samples.append({"gang": gang, **broken})
    return {"gangs_checked": len(hosts), "violations": len(samples), "violation_samples": samples[:SAMPLES]}


def _anti_affinity(on: list[str]) -> dict[str, Any] | None:
    shared = {host: n for host, n in Counter(on).items() if n > 1}
    return {"shared_hosts": shared} if shared else None


def _within(on: list[str], rack_of: Mapping[str, str]) -> dict[str, Any] | None:
    racks = Counter(rack_of.get(host, "none") for host in on)
    return {"racks": dict(racks)} if len(racks) > 1 else None


def _skew(on: list[str], zone_of: Mapping[str, str], zones: Sequence[str]) -> dict[str, Any] | None:
    counts = Counter(zone_of.get(host, "none") for host in on)
    per_zone = [counts.get(zone, 0) for zone in zones]
    outside = sum(n for zone, n in counts.items() if zone not in zones)
    if outside or max(per_zone) - min(per_zone) > MAX_SKEW:
        return {"zones": per_zone, "outside": outside}
    return None


class GangPhase:
    """The phase for one host count, on the cloud with ``baseline`` on it."""

    def __init__(
        self,
        client: Client,
        layout: dict[str, Any],
        baseline: dict[str, dict[str, int]],
        clients: int,
        seconds: float,
        sizes: Sequence[int],
        threads: int,
        stop: Stop,
    ):
        self.client = client
        self.hosts = list(layout["hosts"])
        self.held = {rp: dict(used) for rp, used in baseline.items()}
        self.clients = clients
        self.seconds = seconds
        self.sizes = sizes
        self.threads = threads
        self.stop = stop
        self.consumers: list[str] = []  # those of the phase, all still holding allocations

    def release(self, consumers: list[str]) -> None:
        release_consumers(self.client, consumers, self.threads, self.stop)

    def one_run(self, topology: Topology, size: int, kind: str) -> dict[str, Any]:
        placer = GangPlacer(self.client, topology, size, kind)
        log(f"  gangs of {size}, {kind}: {self.clients} clients for {self.seconds:g} s")
        tally, elapsed = place_gangs(placer, self.clients, self.seconds, self.stop)
        add_placements(self.held, tally.placed)
        self.consumers += [p.consumer for p in tally.placed]
        result = summary(tally, elapsed)
        del result["requests_per_placement"]
        result["gangs"] = tally.counts["gangs"]
        result["gangs_per_s"] = round(tally.counts["gangs"] / elapsed, 1)
        providers = {rp for p in tally.placed for rp in p.allocations}
        books = check_over_commit(self.client, providers, self.held, self.threads, self.stop)
        rules = gang_violations(kind, tally.placed, topology.rack_of, topology.zone_of, topology.zones)
        result["over_commits"] = books["violations"]
        result["usage_mismatches"] = books["usage_mismatches"]
        result["providers_checked"] = books["providers_checked"]
        result["over_commit_samples"] = books["violation_samples"]
        result["gangs_checked"] = rules["gangs_checked"]
        result["rule_violations"] = rules["violations"]
        result["rule_samples"] = rules["violation_samples"]
        log(
            f"  gangs of {size}, {kind}: {result['gangs']} gangs, {result['placements']} placements "
            f"({result['placements_per_s']}/s), per gang p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms, "
            f"{result['no_valid_host']} found no room, {result['conflicts']} conflicts, {result['errors']} errors; "
            f"{result['over_commits']} over-commits, {result['usage_mismatches']} usage mismatches, "
            f"{result['rule_violations']} {kind} violations"
        )
        for sample in tally.errors:
            log(f"  ERROR {sample}")
        for sample in rules["violation_samples"][:5]:
            log(f"  GANG VIOLATION ({kind}): {sample}")
        return result

    def run(self, released: list[str]) -> dict[str, Any]:
        """The figures of every gang size and kind."""
        self.release(released)
        topology = Topology(self.hosts)
        log(f"  putting {len(self.hosts)} hosts in {len(topology.racks)} racks and {len(topology.zones)} zones")
        seconds = add_racks_and_zones(self.client, topology, self.threads, self.stop)
        figures: dict[str, Any] = {
            "clients": self.clients,
            "racks": len(topology.racks),
            "zones": len(topology.zones),
            "rack_hosts": RACK_HOSTS,
            "max_skew": MAX_SKEW,
            "topology_seconds": round(seconds, 2),
            "sizes": {},
        }
        for size in self.sizes:
            figures["sizes"][str(size)] = {kind: self.one_run(topology, size, kind) for kind in GANG_KINDS}
        return figures
