"""One host count: a server and database of its own (unless ``url``), then the phases in turn."""

from __future__ import annotations

from typing import Any

from berth.testbed.bench import log
from berth.testbed.bench.cloud import build_layout, check_empty, preload_allocations, remove
from berth.testbed.bench.config import REQUEST_TIMEOUT, BenchConfig
from berth.testbed.bench.phases.candidates import DEFAULT_MAX_CANDIDATES, measure_candidates, server_max_candidates
from berth.testbed.bench.phases.claims import run_claims, verify_capacity
from berth.testbed.bench.phases.gang_phase import GangPhase
from berth.testbed.bench.phases.pick_phase import WEIGH_ALL_PICKS, PickPhase
from berth.testbed.bench.phases.wide_trees import add_wide_trees
from berth.testbed.client import Client, RequestFailed
from berth.testbed.cpu import cpu_check_ms, cpu_times, stolen_percent
from berth.testbed.errors import ApiError, TestbedError
from berth.testbed.parallel import Stop
from berth.testbed.services.databases import Databases
from berth.testbed.services.server import Server


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


class Round:
    """The phases of one host count against ``client``, each adding its part to ``result``."""

    def __init__(self, config: BenchConfig, hosts: int, client: Client, stop: Stop):
        self.config = config
        self.hosts = hosts
        self.client = client
        self.stop = stop
        self.result: dict[str, Any] = {"hosts": hosts}
        self.layout: dict[str, Any] = {}
        self.consumers: list[str] = []
        self.preloaded: dict[str, dict[str, int]] = {}
        self.claim_consumers: list[str] = []
        self.pick_consumers: list[str] = []  # the pick phase's, still holding allocations

    def log(self, message: str) -> None:
        log(f"hosts={self.hosts}: {message}")

    def build(self) -> None:
        self.log(f"building the layout with {self.config.create_clients} clients at {self.client.base_url}")
        times = cpu_times()
        layout = self.layout = build_layout(self.client, self.hosts, self.config.create_clients, self.stop)
        build = {k: layout[k] for k in ("providers", "seconds", "providers_per_second")}
        build["steal_percent"] = stolen_percent(times, cpu_times())
        build["hosts"] = self.hosts
        build["gpu_children"] = len(layout["gpus"])
        build["sharing_providers"] = len(layout["sharing"])
        self.result["build"] = build
        self.log(
            f"{layout['providers']} providers in {layout['seconds']:.1f} s "
            f"({layout['providers_per_second']:.1f}/s, {percent(build['steal_percent'])} "
            "of the CPU time stolen by the host)"
        )

    def preload(self) -> None:
        records = self.config.allocations
        self.log(f"writing {records} allocation records with POST /allocations")
        loaded = preload_allocations(self.client, self.layout, records, self.config.create_clients, self.stop)
        self.preloaded = loaded["held"]
        self.consumers = loaded["consumers"]
        self.result["preload"] = {k: loaded[k] for k in ("records", "seconds", "records_per_second")}
        self.result["preload"]["consumers"] = len(loaded["consumers"])
        self.log(
            f"{loaded['records']} allocation records in {loaded['seconds']:.1f} s "
            f"({loaded['records_per_second']:.0f}/s)"
        )

    def worst_layout(self) -> None:
        """What the worst candidate queries need besides the layout: the wide trees."""
        self.log("adding the wide trees of the worst candidate queries")
        wide = self.result["worst_layout"] = add_wide_trees(
            self.client, self.layout, self.config.create_clients, self.stop
        )
        self.log(f"{wide['providers']} PCI devices on {wide['wide_tree_hosts']} hosts in {wide['seconds']:.1f} s")

    def candidates(self) -> None:
        self.worst_layout()
        self.log(f"timing allocation candidates ({self.config.queries} queries per variant)")
        cap = DEFAULT_MAX_CANDIDATES if self.config.url else server_max_candidates()
        self.result["server_max_candidates"] = cap
        self.result["candidates"] = measure_candidates(
            self.client, self.config.queries, self.hosts, self.layout, cap, self.stop
        )

    def claims(self) -> dict[str, dict[str, int]]:
        """Run the claims; what they took, by provider."""
        self.log(f"claiming with {self.config.clients} clients for {self.config.claims_seconds:g} s")
        times = cpu_times()
        claims = run_claims(self.client, self.config.clients, self.config.claims_seconds, self.stop)
        claims["steal_percent"] = stolen_percent(times, cpu_times())
        claimed: dict[str, dict[str, int]] = claims.pop("_claimed")
        self.claim_consumers = claims.pop("_consumers")
        self.consumers = self.consumers + self.claim_consumers
        self.result["claims"] = claims
        self.log(
            f"{claims['claims']} claims ({claims['claims_per_second']:.1f}/s), "
            f"{claims['conflicts']} conflicts {claims['conflict_codes']}, {claims['errors']} errors, "
            f"{claims['no_candidates']} empty candidate lists"
        )
        return claimed

    def machine(self, server: Server | None) -> None:
        """The CPU check after the claims, and the server's memory."""
        cpu = self.result["cpu_check_ms"]
        cpu["after"] = cpu_check_ms()
        self.log(f"CPU check {cpu['before']:.1f} ms before the server started, {cpu['after']:.1f} ms after the claims")
        memory = self.result["memory"] = server.memory() if server else None
        if memory:
            self.log(
                f"server PSS {memory['pss_total_mb']} MB, RSS {memory['rss_total_mb']} MB in "
                f"{memory['processes']} processes (largest worker {memory['rss_max_worker_mb']} MB)"
            )

    def verify(self, claimed: dict[str, dict[str, int]]) -> None:
        self.log(f"verifying capacity of {len(claimed)} providers")
        expected = {rp: dict(used) for rp, used in claimed.items()}
        for rp, used in self.preloaded.items():
            if rp in expected:
                for rc, amount in used.items():
                    expected[rp][rc] = expected[rp].get(rc, 0) + amount
        verification = verify_capacity(self.client, expected, self.config.create_clients, self.stop)
        self.result["verification"] = verification
        self.log(f"{verification['violations']} violations, {verification['usage_mismatches']} usage mismatches")

    def pick_and_claim(self, claim_consumers: list[str]) -> None:
        """Pick and claim beside the client-side loop, each on the cloud as the preload left it."""
        config = self.config
        self.log(f"pick and claim against the client-side loop, {config.pick_clients} clients")
        phase = PickPhase(
            self.client,
            self.layout,
            self.preloaded,
            config.pick_clients,
            config.pick_seconds,
            config.group_size,
            config.create_clients,
            self.stop,
        )
        try:
            picked, client_side = phase.run(claim_consumers, min(config.queries, WEIGH_ALL_PICKS))
        finally:
            self.consumers = self.consumers + phase.consumers
        self.pick_consumers = phase.consumers
        self.result["pick_and_claim"] = picked
        self.result["client_side_claims"] = client_side
        for name, figures, broken in (
            ("pick and claim", picked, "anti-affinity violations"),
            ("client-side loop (baseline)", client_side, "anti-affinity breaks, expected of the baseline"),
        ):
            self.log(
                f"{name}: {figures['placements_per_s']} placements/s, {figures['violations']} over-commits, "
                f"{figures['anti_affinity_violations']} {broken}"
            )

    def gangs(self) -> None:
        """Gangs of each size and kind, on the cloud as the preload left it."""
        config = self.config
        self.log(f"gangs of {config.gang_sizes}, {config.gang_clients} clients")
        phase = GangPhase(
            self.client,
            self.layout,
            self.preloaded,
            config.gang_clients,
            config.gang_seconds,
            config.gang_sizes,
            config.create_clients,
            self.stop,
        )
        try:
            self.result["gangs"] = phase.run(self.pick_consumers)
        finally:
            # The pick phase's stay listed: removing them again later finds them gone, a 404.
            self.consumers = self.consumers + phase.consumers

    def run(self, server: Server | None, reused: bool) -> None:
        if reused:
            check_empty(self.client)
        self.build()
        if self.config.allocations:
            self.preload()
        self.candidates()
        claimed = self.claims()
        self.machine(server)
        self.verify(claimed)
        self.pick_and_claim(self.claim_consumers)
        self.gangs()
        if reused:
            self.log("removing the bench's consumers and providers")
            remove(self.client, self.layout, self.consumers, self.config.create_clients, self.stop)


def bench_round(
    config: BenchConfig,
    hosts: int,
    run: int,
    databases: Databases | None,
    tmpdir: str,
    stop: Stop,
    servers: list[Server],
) -> dict[str, Any]:
    """Measure one host count; ``servers`` collects the server started for it (stopped here too)."""
    server = None
    # Before the server starts, whose workers would otherwise still be setting up.
    cpu_before = cpu_check_ms()
    if config.url or databases is None:
        base_url = config.url or ""
    else:
        server = Server(databases.new(f"bench_{run}_{hosts}"), config.workers, tmpdir)
        servers.append(server)
        log(f"hosts={hosts}: starting berth serve ({config.workers} workers, {databases.kind})")
        server.start()
        base_url = server.url
    reused = bool(config.url) or (databases is not None and databases.reused)
    client = Client(base_url, timeout=REQUEST_TIMEOUT)
    one = Round(config, hosts, client, stop)
    one.result["cpu_check_ms"] = {"before": cpu_before}
    try:
        one.run(server, reused)
    except ApiError as e:
        raise TestbedError(f"hosts={hosts}: the server answered an error: {e}") from e
    except RequestFailed as e:
        tail = f"\n--- server log tail ---\n{server.log_tail()}" if server else ""
        raise TestbedError(f"hosts={hosts}: request failed: {e}{tail}") from e
    finally:
        client.close()
        if server:
            server.stop()
    return one.result
