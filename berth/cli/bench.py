"""``berth bench``: build a synthetic cloud through the HTTP API and measure the service.

For each host count the benchmark

1. builds the layout (compute hosts, nested GPU children, sharing disk providers in aggregates) with
   ``--create-clients`` threads and reports providers created per second;
2. times sequential ``GET /allocation_candidates`` requests of five kinds (median and p95);
3. runs ``--clients`` threads that claim resources as a scheduler would (candidates, then
   ``PUT /allocations/{consumer}``) for ``--claims-seconds`` and counts claims, conflicts and errors;
4. checks that no provider that received claims is over-committed, and that the server's usages
   equal the sum of the claims it accepted;
5. reports the resident memory of the server's processes when the benchmark started the server.

Without ``--url`` every host count gets its own server (``berth serve`` in a subprocess on a free
loopback port) and its own empty database.  All HTTP traffic goes to the loopback interface.

Requests go through ``harness.KeepAliveClient`` (libcurl through pycurl, on kept-alive connections), so that
the client's own cost, on the same cores as the server, stays small.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid as uuidlib
from concurrent.futures import ThreadPoolExecutor, wait

import requests

from berth.cli import harness

TOKEN = "admin"
VERSION = "1.39"
CREATE_VERSION = "1.20"  # POST /resource_providers returns the provider (with its generation) from 1.20
REQUEST_TIMEOUT = 300.0
SERVER_START_TIMEOUT = 90.0
WARMUPS = 5
# berth serve generates at most this many candidates per request unless told otherwise
# (--max-candidates / $BERTH_MAX_CANDIDATES); a bench against --url assumes the default.
DEFAULT_MAX_CANDIDATES = 1000
PROGRESS_EVERY = 5.0

FAST_TRAIT = "CUSTOM_BENCH_FAST"
AVX2_TRAIT = "HW_CPU_X86_AVX2"
SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"
HOSTS_PER_SHARING_PROVIDER = 100
BENCH_PROJECT = "bbbbbbbb-0000-4000-8000-000000000001"
BENCH_USER = "bbbbbbbb-0000-4000-8000-000000000002"

HOST_INVENTORY = {
    "VCPU": {"total": 32, "allocation_ratio": 4.0},
    "MEMORY_MB": {"total": 131072, "reserved": 512, "allocation_ratio": 1.0},
    "DISK_GB": {"total": 2000},
}
GPU_INVENTORY = {"VGPU": {"total": 4}}
SHARING_INVENTORY = {"DISK_GB": {"total": 100000}}

VARIANTS = {
    "basic": "resources=VCPU:2,MEMORY_MB:4096,DISK_GB:20&limit=50",
    "traits": f"resources=VCPU:2,MEMORY_MB:4096,DISK_GB:20&limit=50&required={AVX2_TRAIT}",
    "granular_nested": "resources=VCPU:2,MEMORY_MB:4096&resources_GPU=VGPU:1&group_policy=isolate&limit=50",
    "forbidden_agg_sharing": f"resources=VCPU:2,MEMORY_MB:4096,DISK_GB:20&required=!{FAST_TRAIT}&limit=50",
    "unlimited": "resources=VCPU:2,MEMORY_MB:4096,DISK_GB:20",
}
CLAIM_QUERY = "resources=VCPU:2,MEMORY_MB:4096,DISK_GB:20&limit=10"
CLAIM_RESOURCES = {"VCPU": 2, "MEMORY_MB": 4096, "DISK_GB": 20}


class BenchError(Exception):
    """A failure that ends the benchmark with a message instead of a traceback."""


# --------------------------------------------------------------------------------------------------
# The machine's own speed

CPU_CHECK_ROUNDS = 7


def _cpu_check_workload() -> int:
    # Fixed work in the interpreter (arithmetic, a dict, strings), like the server's requests.
    table = {}
    for i in range(20_000):
        table[f"k{i % 5000}"] = (i * 7919) % 104729
    return sum(table.values())


def cpu_check_ms() -> float:
    """Median wall time, in ms, of a fixed piece of Python work while the server is idle.

    A shared virtual machine's speed changes from one minute to the next (by up to a third between
    runs here); this figure, taken before the server starts and after the claims of each host
    count, hints whether a run fell in a slow period.  It is a point sample: the speed also moves
    within a run.
    """
    times = []
    for _ in range(CPU_CHECK_ROUNDS):
        started = time.perf_counter()
        _cpu_check_workload()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def cpu_times() -> list[int] | None:
    """The machine's CPU time counters (``/proc/stat``), or None where there are none."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    return [int(value) for value in fields[1:9]] if fields[:1] == ["cpu"] and len(fields) >= 9 else None


def stolen_percent(before: list[int] | None, after: list[int] | None) -> float | None:
    """The share of the machine's CPU time between two ``cpu_times`` that its host gave to other
    machines ("steal"): the CPU time a phase could not have, whatever the server did."""
    if before is None or after is None:
        return None
    delta = [b - a for a, b in zip(before, after, strict=True)]
    total = sum(delta)  # user nice system idle iowait irq softirq steal; guest time is in user
    return round(100 * delta[7] / total, 1) if total > 0 else None


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------------
# Arguments


def _host_counts(text: str) -> list[int]:
    try:
        counts = [int(part.strip().replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N[,N...], got {text!r}") from None
    if not counts or any(c < 1 for c in counts):
        raise argparse.ArgumentTypeError(f"host counts must be positive integers, got {text!r}")
    return counts


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Build a synthetic cloud through the HTTP API, then measure provider creation, allocation "
        "candidate latency, concurrent claims and (for a server it started) memory. Without --url it "
        "starts its own `berth serve` on a free loopback port, with a fresh database per host count."
    )
    parser.add_argument(
        "--url",
        default=None,
        help="base URL of an already running server (loopback only); the bench then "
        "removes what it created after each host count",
    )
    parser.add_argument(
        "--database",
        default=None,
        help="database of the server the bench starts: a SQLAlchemy URL, or "
        "'postgresql' for a throwaway PostgreSQL (needs tests/pgserver.py and the "
        "PostgreSQL server programs); default: a fresh SQLite file in a temp dir",
    )
    parser.add_argument(
        "--workers",
        type=harness.positive_int,
        default=harness.DEFAULT_WORKERS,
        help="worker processes of the server the bench starts (default: as berth serve, "
        f"cores + 1, at most 4: {harness.DEFAULT_WORKERS} here)",
    )
    parser.add_argument(
        "--hosts",
        type=_host_counts,
        default=[1000],
        metavar="N[,N...]",
        help="compute host counts, one run each (default 1000)",
    )
    parser.add_argument(
        "--queries",
        type=harness.positive_int,
        default=200,
        help="timed GET /allocation_candidates per variant (default 200)",
    )
    parser.add_argument(
        "--clients", type=harness.positive_int, default=8, help="concurrent claiming threads (default 8)"
    )
    parser.add_argument(
        "--claims-seconds",
        type=harness.positive_float,
        default=10.0,
        help="duration of the claims phase in seconds (default 10)",
    )
    parser.add_argument(
        "--create-clients",
        type=harness.positive_int,
        default=8,
        help="concurrent threads building the layout (default 8)",
    )
    parser.add_argument(
        "--allocations",
        type=_non_negative_int,
        default=0,
        help="allocation records (one per consumer and resource class) written with "
        "POST /allocations after the layout and before the measurements "
        "(default 0)",
    )
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the results as JSON")


# --------------------------------------------------------------------------------------------------
# HTTP


class ApiError(BenchError):
    def __init__(self, method, path, status, body):
        self.status = status
        super().__init__(f"{method} {path} -> HTTP {status}: {body[:500]}")


class Api:
    """One kept-alive connection (one per thread) and the bench's token and microversion."""

    def __init__(self, base_url: str):
        self.http = harness.KeepAliveClient(
            base_url,
            {"X-Auth-Token": TOKEN, "OpenStack-API-Version": f"placement {VERSION}", "Accept": "application/json"},
            REQUEST_TIMEOUT,
        )

    def call(self, method, path, body=None, version=VERSION, expect=(200,)):
        headers = {"OpenStack-API-Version": f"placement {version}"} if version != VERSION else None
        r = self.http.request(method, path, body, headers)
        if r.status_code not in expect:
            raise ApiError(method, path, r.status_code, r.text)
        return r.json() if r.content else None

    def close(self):
        self.http.close()


# --------------------------------------------------------------------------------------------------
# Parallel work with a stop flag


class Stop:
    """Set on Ctrl-C / SIGTERM (or a fatal error) so that every worker loop ends quickly."""

    def __init__(self):
        self.event = threading.Event()

    def set(self):
        self.event.set()

    def __bool__(self):
        return self.event.is_set()


def parallel(items, threads: int, work, stop: Stop, base_url: str, label: str = "", total: int | None = None):
    """Run ``work(api, item)`` over ``items`` with ``threads`` threads, one session each.

    Returns the results in item order.  The first exception stops all threads and is re-raised.
    """
    items = list(items)
    total = len(items) if total is None else total
    results = [None] * len(items)
    lock = threading.Lock()
    position = iter(range(len(items)))
    done = [0]
    failure = []

    def loop():
        api = Api(base_url)
        try:
            while not stop and not failure:
                with lock:
                    index = next(position, None)
                if index is None:
                    return
                try:
                    results[index] = work(api, items[index])
                except BaseException as e:  # noqa: BLE001 - handed to the main thread
                    with lock:
                        failure.append(e)
                    return
                with lock:
                    done[0] += 1
        finally:
            api.close()

    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="bench")
    try:
        futures = [pool.submit(loop) for _ in range(min(threads, max(1, len(items))))]
        last = time.monotonic()
        while True:
            finished, pending = wait(futures, timeout=0.5)
            if not pending:
                break
            if label and time.monotonic() - last >= PROGRESS_EVERY:
                last = time.monotonic()
                log(f"  {label}: {done[0]}/{total}")
    except BaseException:
        stop.set()
        raise
    finally:
        pool.shutdown(wait=not stop, cancel_futures=True)
    if failure:
        raise failure[0]
    if stop:
        raise KeyboardInterrupt
    return results


# --------------------------------------------------------------------------------------------------
# Servers and databases


class OwnServer:
    """``berth serve`` in a subprocess of its own session, logging to a file."""

    def __init__(self, database_url: str, workers: int, logdir: str):
        self.database_url = database_url
        self.workers = workers
        self.logpath = os.path.join(logdir, f"server-{time.time_ns()}.log")
        self.process: subprocess.Popen | None = None
        self.url = ""

    def start(self) -> None:
        for attempt in range(3):
            port = harness.free_port()
            self.url = f"http://127.0.0.1:{port}"
            self.process = harness.spawn_server(port, self.database_url, self.workers, self.logpath)
            if self._wait_ready():
                return
            if "Address already in use" not in self.log_tail() or attempt == 2:
                break
        raise BenchError(f"berth serve did not start:\n{self.log_tail()}")

    def _wait_ready(self) -> bool:
        session = harness.new_session(TOKEN, VERSION)
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        try:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    return False
                try:
                    if session.get(self.url + "/", timeout=5).status_code == 200:
                        return True
                except requests.RequestException:
                    pass
                time.sleep(0.2)
        finally:
            session.close()
        self.stop()
        return False

    def log_tail(self, lines: int = 40) -> str:
        try:
            with open(self.logpath, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no server log)"

    def memory(self) -> dict | None:
        """Resident memory of the server's master process and its descendants.

        ``pss_total_mb`` is the server's real footprint: each shared page (the modules the master
        imported before forking, shared libraries) counted once, split between its sharers.
        ``rss_total_mb`` sums every process's resident set and so counts shared pages once per process.
        """
        if self.process is None or self.process.poll() is not None:
            return None
        master = self.process.pid
        pids = [master]
        todo = harness.children_of(master)
        while todo:
            pid = todo.pop()
            pids.append(pid)
            todo.extend(harness.children_of(pid))
        rss = {pid: _status_kb(pid, "/proc/{}/status", "VmRSS:") for pid in pids}
        pss = {pid: _status_kb(pid, "/proc/{}/smaps_rollup", "Pss:") for pid in pids}
        rss = {pid: kb for pid, kb in rss.items() if kb is not None}
        pss = {pid: kb for pid, kb in pss.items() if kb is not None}
        workers = [kb for pid, kb in rss.items() if pid != master]
        return {
            "master_pid": master,
            "processes": len(rss),
            "pss_total_mb": round(sum(pss.values()) / 1024, 1),
            "rss_total_mb": round(sum(rss.values()) / 1024, 1),
            "rss_master_mb": round(rss.get(master, 0) / 1024, 1),
            "rss_max_worker_mb": round(max(workers, default=0) / 1024, 1),
        }

    def stop(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _status_kb(pid: int, path: str, field: str) -> int | None:
    try:
        with open(path.format(pid)) as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Databases:
    """Hands out one empty database per host count and removes them at the end."""

    def __init__(self, spec: str | None, tmpdir: str):
        self.spec = spec
        self.tmpdir = tmpdir
        self.pg = None
        self.kind = "sqlite"
        if spec == "postgresql":
            self.kind = "postgresql"
        elif spec:
            self.kind = "postgresql" if spec.startswith("postgres") else spec.split(":", 1)[0]
        # A database the user named is not ours to throw away: the bench then removes its own data.
        self.reused = bool(spec) and spec != "postgresql"

    def new(self, hosts: int, run: int) -> str:
        if not self.spec:
            return f"sqlite:///{os.path.join(self.tmpdir, f'bench-{run}-{hosts}.sqlite')}"
        if self.spec == "postgresql":
            if self.pg is None:
                module = harness.load_pgserver(BenchError, "berth_bench_pgserver")
                log("starting a throwaway PostgreSQL")
                try:
                    self.pg = module.start_postgres()
                except Exception as e:  # noqa: BLE001
                    raise BenchError(f"--database postgresql: could not start PostgreSQL: {e}") from e
            return self.pg.create_database(f"bench_{run}_{hosts}")
        return self.spec

    def close(self) -> None:
        if self.pg is not None:
            self.pg.stop()
            self.pg = None


# --------------------------------------------------------------------------------------------------
# Layout


def has_sharing(i: int) -> bool:
    return i % 10 == 1


def sharing_group(i: int) -> int:
    # The hosts with i % 10 == 1 are 1, 11, 21, ...; every 100 of them share one provider.
    return (i // 10) // HOSTS_PER_SHARING_PROVIDER


def sharing_provider_count(hosts: int) -> int:
    sharing_hosts = (hosts - 2) // 10 + 1 if hosts >= 2 else 0
    return -(-sharing_hosts // HOSTS_PER_SHARING_PROVIDER)


def server_max_candidates() -> int:
    """The server's cap on candidates per request (``berth serve --max-candidates``), as inherited."""
    try:
        return int(os.environ.get("BERTH_MAX_CANDIDATES", DEFAULT_MAX_CANDIDATES))
    except ValueError:
        return DEFAULT_MAX_CANDIDATES


def expected_counts(hosts: int, cap: int) -> dict:
    """Allocation requests each variant should return on the untouched layout.

    ``cap`` is the server's own limit on candidates per request, which also bounds "unlimited".
    """
    even = (hosts + 1) // 2
    odd = hosts // 2
    sharing_hosts = (hosts - 2) // 10 + 1 if hosts >= 2 else 0
    gpu_hosts = (hosts + 4) // 5
    # A host in a sharing aggregate has two ways to get its disk: its own or the shared one.
    return {
        "basic": min(50, hosts + sharing_hosts),
        "traits": min(50, even),
        "granular_nested": min(50, gpu_hosts),
        "forbidden_agg_sharing": min(50, odd + sharing_hosts),
        "unlimited": min(cap, hosts + sharing_hosts),
    }


def _inventories(spec: dict) -> dict:
    return {rc: dict(values) for rc, values in spec.items()}


def create_provider(api: Api, name: str, parent: str | None = None) -> dict:
    body = {"name": name}
    if parent:
        body["parent_provider_uuid"] = parent
    return api.call("POST", "/resource_providers", body, version=CREATE_VERSION)


def set_inventories(api: Api, rp: dict, spec: dict) -> int:
    out = api.call(
        "PUT",
        f"/resource_providers/{rp['uuid']}/inventories",
        {"resource_provider_generation": rp["generation"], "inventories": _inventories(spec)},
    )
    rp["generation"] = out["resource_provider_generation"]
    return rp["generation"]


def set_traits(api: Api, rp: dict, traits: list[str]) -> None:
    out = api.call(
        "PUT",
        f"/resource_providers/{rp['uuid']}/traits",
        {"resource_provider_generation": rp["generation"], "traits": traits},
    )
    rp["generation"] = out["resource_provider_generation"]


def set_aggregates(api: Api, rp: dict, aggregates: list[str]) -> None:
    out = api.call(
        "PUT",
        f"/resource_providers/{rp['uuid']}/aggregates",
        {"resource_provider_generation": rp["generation"], "aggregates": aggregates},
    )
    rp["generation"] = out["resource_provider_generation"]


def build_layout(base_url: str, hosts: int, threads: int, stop: Stop) -> dict:
    """Create the providers of ``hosts`` compute hosts; returns uuids and timing."""
    started = time.perf_counter()
    api = Api(base_url)
    try:
        api.call("PUT", f"/traits/{FAST_TRAIT}", expect=(201, 204))
    finally:
        api.close()

    def make_sharing(api, k):
        aggregate = str(uuidlib.uuid4())
        rp = create_provider(api, f"share-{k}")
        set_inventories(api, rp, SHARING_INVENTORY)
        set_traits(api, rp, [SHARING_TRAIT])
        set_aggregates(api, rp, [aggregate])
        return {"uuid": rp["uuid"], "aggregate": aggregate}

    sharing = parallel(range(sharing_provider_count(hosts)), threads, make_sharing, stop, base_url)

    def make_host(api, i):
        rp = create_provider(api, f"cn-{i}")
        set_inventories(api, rp, HOST_INVENTORY)
        if i % 2 == 0:
            set_traits(api, rp, [AVX2_TRAIT, FAST_TRAIT])
        if has_sharing(i):
            set_aggregates(api, rp, [sharing[sharing_group(i)]["aggregate"]])
        gpu = None
        if i % 5 == 0:
            child = create_provider(api, f"cn-{i}-gpu", parent=rp["uuid"])
            set_inventories(api, child, GPU_INVENTORY)
            gpu = child["uuid"]
        return rp["uuid"], gpu

    made = parallel(range(hosts), threads, make_host, stop, base_url, label="hosts built")
    elapsed = time.perf_counter() - started
    host_uuids = [m[0] for m in made]
    gpu_uuids = [m[1] for m in made if m[1]]
    providers = len(host_uuids) + len(gpu_uuids) + len(sharing)
    return {
        "hosts": host_uuids,
        "gpus": gpu_uuids,
        "sharing": [s["uuid"] for s in sharing],
        "providers": providers,
        "seconds": elapsed,
        "providers_per_second": providers / elapsed,
    }


PRELOAD_RESOURCES = {"VCPU": 1, "MEMORY_MB": 256, "DISK_GB": 1}
PRELOAD_CONSUMERS_PER_REQUEST = 500


def preload_allocations(base_url: str, layout: dict, records: int, threads: int, stop: Stop) -> dict:
    """Write ``records`` allocation records, three per consumer (``PRELOAD_RESOURCES`` on one host,
    hosts taken in turn), in batches of ``POST /allocations``.  Returns the consumers, what each host
    received, and the rate."""
    hosts = layout["hosts"]
    per_consumer = len(PRELOAD_RESOURCES)
    consumers = [str(uuidlib.uuid4()) for _ in range(-(-records // per_consumer))]
    batches = [
        list(range(start, min(start + PRELOAD_CONSUMERS_PER_REQUEST, len(consumers))))
        for start in range(0, len(consumers), PRELOAD_CONSUMERS_PER_REQUEST)
    ]

    def write(api, batch):
        body = {
            consumers[n]: {
                "allocations": {hosts[n % len(hosts)]: {"resources": PRELOAD_RESOURCES}},
                "project_id": BENCH_PROJECT,
                "user_id": BENCH_USER,
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            }
            for n in batch
        }
        api.call("POST", "/allocations", body, expect=(204,))

    started = time.perf_counter()
    parallel(batches, threads, write, stop, base_url, label="allocation batches written")
    elapsed = time.perf_counter() - started
    held: dict[str, dict[str, int]] = {}
    for n in range(len(consumers)):
        used = held.setdefault(hosts[n % len(hosts)], {})
        for rc, amount in PRELOAD_RESOURCES.items():
            used[rc] = used.get(rc, 0) + amount
    return {
        "consumers": consumers,
        "held": held,
        "records": len(consumers) * per_consumer,
        "seconds": elapsed,
        "records_per_second": len(consumers) * per_consumer / elapsed,
    }


def remove_layout(base_url: str, layout: dict, consumers: list[str], threads: int, stop: Stop) -> None:
    """Delete what the bench created on a server it did not start (allocations first, then trees)."""

    def delete_consumer(api, consumer):
        api.call("DELETE", f"/allocations/{consumer}", expect=(204, 404))

    def delete_provider(api, rp):
        api.call("DELETE", f"/resource_providers/{rp}", expect=(204, 404))

    parallel(consumers, threads, delete_consumer, stop, base_url, label="consumers removed")
    parallel(layout.get("gpus", []), threads, delete_provider, stop, base_url)
    parallel(
        layout.get("hosts", []) + layout.get("sharing", []),
        threads,
        delete_provider,
        stop,
        base_url,
        label="providers removed",
    )


# --------------------------------------------------------------------------------------------------
# Measurements


def percentile(values: list[float], pct: int) -> float:
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[pct - 1]


def check_variant(name: str, body: dict, layout_sets: dict) -> str | None:
    """A sanity check of what each variant returned; a message when something looks wrong."""
    for request in body.get("allocation_requests", []):
        providers = set(request["allocations"])
        roots = providers & layout_sets["hosts"]
        if name in ("traits", "forbidden_agg_sharing"):
            fast = bool(roots & layout_sets["fast"])
            if (name == "traits") != fast:
                return f"{name}: an allocation request uses host(s) {sorted(roots)} against the trait filter"
        if name == "granular_nested":
            gpus = [rp for rp, a in request["allocations"].items() if "VGPU" in a["resources"]]
            if len(gpus) != 1 or gpus[0] not in layout_sets["gpus"]:
                return f"{name}: allocation request without exactly one VGPU child: {request}"
    return None


def measure_candidates(base_url: str, queries: int, hosts: int, layout: dict, cap: int, stop: Stop) -> dict:
    api = Api(base_url)
    layout_sets = {
        "hosts": set(layout["hosts"]),
        "fast": {u for i, u in enumerate(layout["hosts"]) if i % 2 == 0},
        "gpus": set(layout["gpus"]),
        "sharing": set(layout["sharing"]),
    }
    expected = expected_counts(hosts, cap)
    results = {}
    try:
        for name, query in VARIANTS.items():
            path = f"/allocation_candidates?{query}"
            times, errors, counts, problems = [], 0, set(), []
            sharing_used = 0
            for n in range(WARMUPS + queries):
                if stop:
                    raise KeyboardInterrupt
                t0 = time.perf_counter()
                r = api.http.get(path)
                elapsed = time.perf_counter() - t0
                if r.status_code != 200:
                    errors += 1
                    if len(problems) < 3:
                        problems.append(f"HTTP {r.status_code}: {r.text[:300]}")
                    continue
                if n < WARMUPS:
                    if n == 0:
                        body = r.json()
                        problem = check_variant(name, body, layout_sets)
                        if problem:
                            problems.append(problem)
                        sharing_used = sum(
                            1 for req in body["allocation_requests"] if set(req["allocations"]) & layout_sets["sharing"]
                        )
                    continue
                times.append(elapsed * 1000)
                counts.add(len(r.json()["allocation_requests"]))
            entry = {
                "query": query,
                "queries": len(times),
                "errors": errors,
                "median_ms": round(statistics.median(times), 2) if times else None,
                "p95_ms": round(percentile(times, 95), 2) if times else None,
                "allocation_requests": sorted(counts)[0] if len(counts) == 1 else sorted(counts),
                "expected_allocation_requests": expected[name],
                "requests_using_sharing_provider": sharing_used,
                "problems": problems,
            }
            if counts and counts != {expected[name]}:
                problems.append(f"{name}: returned {sorted(counts)} allocation requests, expected {expected[name]}")
            for problem in problems:
                log(f"  WARNING {problem}")
            results[name] = entry
            log(
                f"  {name}: median {entry['median_ms']} ms, p95 {entry['p95_ms']} ms, "
                f"{entry['allocation_requests']} allocation requests"
            )
    finally:
        api.close()
    return results


def run_claims(base_url: str, clients: int, seconds: float, stop: Stop) -> dict:
    lock = threading.Lock()
    totals = {"claims": 0, "conflicts": 0, "errors": 0, "no_candidates": 0}
    conflict_codes: dict[str, int] = {}
    error_samples: list[str] = []
    claimed: dict[str, dict[str, int]] = {}
    consumers: list[str] = []
    put_ms: list[float] = []
    get_ms: list[float] = []
    deadline = time.monotonic() + seconds

    def client(_):
        api = Api(base_url)
        rng = random.Random()
        mine = {"claims": 0, "conflicts": 0, "errors": 0, "no_candidates": 0}
        my_put, my_get, my_consumers, my_claimed, my_codes, my_errors = [], [], [], {}, {}, []
        try:
            while time.monotonic() < deadline and not stop:
                try:
                    t0 = time.perf_counter()
                    r = api.http.get(f"/allocation_candidates?{CLAIM_QUERY}")
                    my_get.append((time.perf_counter() - t0) * 1000)
                    if r.status_code != 200:
                        mine["errors"] += 1
                        my_errors.append(f"GET /allocation_candidates -> HTTP {r.status_code}: {r.text[:300]}")
                        continue
                    requests_ = r.json()["allocation_requests"]
                    if not requests_:
                        mine["no_candidates"] += 1  # the cloud is full
                        time.sleep(0.05)
                        continue
                    choice = rng.choice(requests_)["allocations"]
                    consumer = str(uuidlib.uuid4())
                    body = {
                        "allocations": choice,
                        "project_id": BENCH_PROJECT,
                        "user_id": BENCH_USER,
                        "consumer_generation": None,
                        "consumer_type": "INSTANCE",
                    }
                    t0 = time.perf_counter()
                    r = api.http.request("PUT", f"/allocations/{consumer}", body)
                    my_put.append((time.perf_counter() - t0) * 1000)
                except (OSError, http.client.HTTPException) as e:
                    if stop:
                        return
                    mine["errors"] += 1
                    my_errors.append(f"request failed: {e}")
                    continue
                if r.status_code == 204:
                    mine["claims"] += 1
                    my_consumers.append(consumer)
                    for rp, alloc in choice.items():
                        used = my_claimed.setdefault(rp, {})
                        for rc, amount in alloc["resources"].items():
                            used[rc] = used.get(rc, 0) + amount
                elif r.status_code == 409:
                    mine["conflicts"] += 1
                    try:
                        code = r.json()["errors"][0].get("code", "?")
                    except (ValueError, KeyError, IndexError, TypeError):
                        code = "?"
                    my_codes[code] = my_codes.get(code, 0) + 1
                else:
                    mine["errors"] += 1
                    my_errors.append(f"PUT /allocations/{consumer} -> HTTP {r.status_code}: {r.text[:300]}")
        finally:
            api.close()
            with lock:
                for key, value in mine.items():
                    totals[key] += value
                for code, n in my_codes.items():
                    conflict_codes[code] = conflict_codes.get(code, 0) + n
                for rp, used in my_claimed.items():
                    into = claimed.setdefault(rp, {})
                    for rc, amount in used.items():
                        into[rc] = into.get(rc, 0) + amount
                consumers.extend(my_consumers)
                put_ms.extend(my_put)
                get_ms.extend(my_get)
                error_samples.extend(my_errors[: max(0, 5 - len(error_samples))])

    started = time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=clients, thread_name_prefix="claim")
    try:
        futures = [pool.submit(client, n) for n in range(clients)]
        last = time.monotonic()
        while True:
            finished, pending = wait(futures, timeout=0.5)
            if not pending:
                break
            if time.monotonic() - last >= PROGRESS_EVERY:
                last = time.monotonic()
                log(f"  claiming: {time.monotonic() - deadline + seconds:.0f}/{seconds:.0f} s")
        for f in futures:
            f.result()
    except BaseException:
        stop.set()
        raise
    finally:
        pool.shutdown(wait=not stop, cancel_futures=True)
    if stop:
        raise KeyboardInterrupt
    elapsed = time.perf_counter() - started
    for sample in error_samples:
        log(f"  ERROR {sample}")
    return {
        **totals,
        "seconds": round(elapsed, 2),
        "claims_per_second": totals["claims"] / elapsed,
        "conflict_codes": conflict_codes,
        "error_samples": error_samples,
        "candidates_median_ms": round(statistics.median(get_ms), 2) if get_ms else None,
        "put_median_ms": round(statistics.median(put_ms), 2) if put_ms else None,
        "put_p95_ms": round(percentile(put_ms, 95), 2) if put_ms else None,
        "providers_claimed": len(claimed),
        "_claimed": claimed,
        "_consumers": consumers,
    }


def verify_capacity(base_url: str, claimed: dict, threads: int, stop: Stop) -> dict:
    """No over-commit on any provider that received claims; usages equal the accepted claims."""

    def check(api, rp):
        usages = api.call("GET", f"/resource_providers/{rp}/usages")["usages"]
        inventories = api.call("GET", f"/resource_providers/{rp}/inventories")["inventories"]
        violations, mismatches = [], []
        for rc, used in usages.items():
            inv = inventories.get(rc)
            capacity = (inv["total"] - inv["reserved"]) * inv["allocation_ratio"] if inv else 0
            if used > capacity:
                violations.append({"provider": rp, "resource_class": rc, "used": used, "capacity": capacity})
        for rc in set(usages) | set(claimed[rp]):
            if usages.get(rc, 0) != claimed[rp].get(rc, 0):
                mismatches.append(
                    {
                        "provider": rp,
                        "resource_class": rc,
                        "server_used": usages.get(rc, 0),
                        "accepted_claims": claimed[rp].get(rc, 0),
                    }
                )
        return violations, mismatches

    checked = parallel(sorted(claimed), threads, check, stop, base_url, label="providers verified")
    violations = [v for vs, _ in checked for v in vs]
    mismatches = [m for _, ms in checked for m in ms]
    for v in violations[:5]:
        log(f"  VIOLATION {v}")
    for m in mismatches[:5]:
        log(f"  MISMATCH {m}")
    return {
        "providers_checked": len(checked),
        "violations": len(violations),
        "usage_mismatches": len(mismatches),
        "violation_samples": violations[:20],
        "mismatch_samples": mismatches[:20],
    }


# --------------------------------------------------------------------------------------------------
# One host count


def check_empty(base_url: str) -> None:
    api = Api(base_url)
    try:
        found = api.call("GET", "/resource_providers?name=cn-0")["resource_providers"]
    finally:
        api.close()
    if found:
        raise BenchError(
            "the server already has a provider named cn-0 (left over from an interrupted run?); "
            "use an empty server/database"
        )


def bench_round(
    args, hosts: int, run: int, databases: Databases | None, tmpdir: str, stop: Stop, servers: list
) -> dict:
    server = None
    # Before the server starts, whose workers would otherwise still be setting up.
    cpu_before = cpu_check_ms()
    if args.url:
        base_url = args.url
    else:
        database_url = databases.new(hosts, run)
        server = OwnServer(database_url, args.workers, tmpdir)
        servers.append(server)
        log(f"hosts={hosts}: starting berth serve ({args.workers} workers, {databases.kind})")
        server.start()
        base_url = server.url
    reused = bool(args.url) or (databases is not None and databases.reused)
    result = {"hosts": hosts}
    layout = {}
    consumers: list[str] = []
    try:
        if reused:
            check_empty(base_url)
        result["cpu_check_ms"] = {"before": cpu_before}
        log(f"hosts={hosts}: building the layout with {args.create_clients} clients at {base_url}")
        times = cpu_times()
        layout = build_layout(base_url, hosts, args.create_clients, stop)
        result["build"] = {k: layout[k] for k in ("providers", "seconds", "providers_per_second")}
        result["build"]["steal_percent"] = stolen_percent(times, cpu_times())
        result["build"]["hosts"] = hosts
        result["build"]["gpu_children"] = len(layout["gpus"])
        result["build"]["sharing_providers"] = len(layout["sharing"])
        log(
            f"hosts={hosts}: {layout['providers']} providers in {layout['seconds']:.1f} s "
            f"({layout['providers_per_second']:.1f}/s, {_percent(result['build']['steal_percent'])} "
            "of the CPU time stolen by the host)"
        )

        preloaded = {}
        if args.allocations:
            log(f"hosts={hosts}: writing {args.allocations} allocation records with POST /allocations")
            loaded = preload_allocations(base_url, layout, args.allocations, args.create_clients, stop)
            preloaded = loaded["held"]
            consumers = loaded["consumers"]
            result["preload"] = {k: loaded[k] for k in ("records", "seconds", "records_per_second")}
            result["preload"]["consumers"] = len(loaded["consumers"])
            log(
                f"hosts={hosts}: {loaded['records']} allocation records in {loaded['seconds']:.1f} s "
                f"({loaded['records_per_second']:.0f}/s)"
            )

        log(f"hosts={hosts}: timing allocation candidates ({args.queries} queries per variant)")
        cap = DEFAULT_MAX_CANDIDATES if args.url else server_max_candidates()
        result["server_max_candidates"] = cap
        result["candidates"] = measure_candidates(base_url, args.queries, hosts, layout, cap, stop)

        log(f"hosts={hosts}: claiming with {args.clients} clients for {args.claims_seconds:g} s")
        times = cpu_times()
        claims = run_claims(base_url, args.clients, args.claims_seconds, stop)
        claims["steal_percent"] = stolen_percent(times, cpu_times())
        claimed = claims.pop("_claimed")
        consumers = consumers + claims.pop("_consumers")
        result["claims"] = claims
        log(
            f"hosts={hosts}: {claims['claims']} claims ({claims['claims_per_second']:.1f}/s), "
            f"{claims['conflicts']} conflicts {claims['conflict_codes']}, {claims['errors']} errors, "
            f"{claims['no_candidates']} empty candidate lists"
        )
        result["cpu_check_ms"]["after"] = cpu_check_ms()
        log(
            f"hosts={hosts}: CPU check {result['cpu_check_ms']['before']:.1f} ms before the server "
            f"started, {result['cpu_check_ms']['after']:.1f} ms after the claims"
        )
        result["memory"] = server.memory() if server else None
        if result["memory"]:
            log(
                f"hosts={hosts}: server PSS {result['memory']['pss_total_mb']} MB, "
                f"RSS {result['memory']['rss_total_mb']} MB in "
                f"{result['memory']['processes']} processes (largest worker "
                f"{result['memory']['rss_max_worker_mb']} MB)"
            )

        log(f"hosts={hosts}: verifying capacity of {len(claimed)} providers")
        expected_usage = {rp: dict(used) for rp, used in claimed.items()}
        for rp, used in preloaded.items():
            if rp in expected_usage:
                for rc, amount in used.items():
                    expected_usage[rp][rc] = expected_usage[rp].get(rc, 0) + amount
        result["verification"] = verify_capacity(base_url, expected_usage, args.create_clients, stop)
        log(
            f"hosts={hosts}: {result['verification']['violations']} violations, "
            f"{result['verification']['usage_mismatches']} usage mismatches"
        )
        if reused:
            log(f"hosts={hosts}: removing the bench's consumers and providers")
            remove_layout(base_url, layout, consumers, args.create_clients, stop)
    except ApiError as e:
        raise BenchError(f"hosts={hosts}: the server answered an error: {e}") from e
    except (OSError, http.client.HTTPException) as e:
        tail = f"\n--- server log tail ---\n{server.log_tail()}" if server else ""
        raise BenchError(f"hosts={hosts}: request failed: {e}{tail}") from e
    finally:
        if server:
            server.stop()
    return result


# --------------------------------------------------------------------------------------------------
# Output


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _ms(entry: dict | None) -> str:
    if not entry or entry.get("median_ms") is None:
        return "ERR"
    text = f"{entry['median_ms']:.1f}/{entry['p95_ms']:.1f}"
    if entry.get("errors"):
        text += f" ERR({entry['errors']})"
    return text


def format_table(results: list[dict]) -> str:
    headers = [
        "hosts",
        "providers",
        "create/s",
        "basic ms",
        "traits ms",
        "granular_nested ms",
        "forbidden_agg_sharing ms",
        "unlimited ms",
        "claims/s",
        "conflicts",
        "errors",
        "violations",
        "memory MB",
        "cpu check ms",
        "steal %",
    ]
    rows = []
    for r in results:
        c = r["candidates"]
        mem = r.get("memory")
        rows.append(
            [
                str(r["hosts"]),
                str(r["build"]["providers"]),
                f"{r['build']['providers_per_second']:.1f}",
                _ms(c.get("basic")),
                _ms(c.get("traits")),
                _ms(c.get("granular_nested")),
                _ms(c.get("forbidden_agg_sharing")),
                _ms(c.get("unlimited")),
                f"{r['claims']['claims_per_second']:.1f}",
                str(r["claims"]["conflicts"]),
                str(r["claims"]["errors"]),
                str(r["verification"]["violations"]),
                f"{mem['pss_total_mb']:.0f} (RSS {mem['rss_total_mb']:.0f})" if mem else "-",
                "{before:.1f}/{after:.1f}".format(**r["cpu_check_ms"]),
                f"{_percent(r['build'].get('steal_percent'))}/{_percent(r['claims'].get('steal_percent'))}",
            ]
        )
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)) for row in rows]
    lines.append(
        "latency columns: median/p95 in ms over sequential GET /allocation_candidates; "
        "memory MB: PSS of master + workers (their RSS summed); cpu check ms: a fixed piece "
        "of Python work before the server started / after the claims (higher: a slower "
        "machine); steal %: CPU time the host gave to other machines while the layout "
        "was built / during the claims"
    )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# Entry point


def run(args) -> int:
    stop = Stop()
    servers: list[OwnServer] = []
    tmpdir = tempfile.mkdtemp(prefix="berth-bench-")
    databases = None
    results: list[dict] = []

    def on_sigterm(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        if args.url:
            args.url = harness.check_loopback_url(args.url, BenchError)
            if args.database:
                raise BenchError("--database applies only to a server the bench starts; drop it or --url")
        else:
            databases = Databases(args.database, tmpdir)
        for run_number, hosts in enumerate(args.hosts):
            results.append(bench_round(args, hosts, run_number, databases, tmpdir, stop, servers))
        table = format_table(results)
        print(table, flush=True)
        if args.json:
            document = {
                "config": {
                    "url": args.url,
                    "database": databases.kind if databases else None,
                    "workers": None if args.url else args.workers,
                    "hosts": args.hosts,
                    "queries": args.queries,
                    "clients": args.clients,
                    "claims_seconds": args.claims_seconds,
                    "create_clients": args.create_clients,
                    "allocations": args.allocations,
                    "microversion": VERSION,
                    "python": platform.python_version(),
                    "cpus": os.cpu_count(),
                    "platform": platform.platform(),
                    "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                },
                "results": results,
            }
            with open(args.json, "w") as f:
                json.dump(document, f, indent=2)
            log(f"results written to {args.json}")
        bad = []
        for r in results:
            if r["claims"]["errors"] or r["verification"]["violations"] or r["verification"]["usage_mismatches"]:
                bad.append(f"hosts={r['hosts']}: errors, violations or usage mismatches")
            if any(v["errors"] for v in r["candidates"].values()):
                bad.append(f"hosts={r['hosts']}: failed allocation candidate queries")
            basic = r["candidates"]["basic"]
            if r["hosts"] >= 50 and basic["allocation_requests"] != 50:
                bad.append(f"hosts={r['hosts']}: basic returned {basic['allocation_requests']} requests, not 50")
        for line in bad:
            log(f"FAILED {line}")
        return 1 if bad else 0
    except KeyboardInterrupt:
        stop.set()
        log("interrupted; cleaning up")
        return 130
    except BenchError as e:
        stop.set()
        log(f"error: {e}")
        return 2
    finally:
        stop.set()
        signal.signal(signal.SIGTERM, previous)
        for server in servers:
            server.stop()
        if databases is not None:
            databases.close()
        shutil.rmtree(tmpdir, ignore_errors=True)
