"""How long the dashboard takes to show the cloud's capacity, in headless Chromium, at bench size.

Run as ``python -m berth.testbed.dashboard_timing`` (``--help`` for the options). It starts
``berth serve`` on a SQLite file with the default number of workers, fills it through the API with
``--hosts`` hosts (the bench's host inventory, a GPU child on every fifth) and ``--consumers-per-host``
consumers on each host, spread over ``--projects`` projects, then opens ``/dashboard`` in Chromium
(Playwright) and times, from the navigation's start, the first paint of the capacity table:

- cold: each run right after a fresh ``berth serve`` started on the same file;
- warm: each run on a server that has drawn the page once already.

A database file given with ``--database-file`` is kept and reused by the next run (built only when
it does not exist yet). The JSON endpoints are also timed on their own (median of the runs).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid as uuidlib
from collections.abc import Callable
from typing import Any

from berth.testbed.bench.cloud import GPU_INVENTORY, HOST_INVENTORY
from berth.testbed.client import Client
from berth.testbed.layout import ProviderSpec, create_tree
from berth.testbed.parallel import Stop, parallel
from berth.testbed.report import Log
from berth.testbed.services.server import Server

log = Log("dashboard-timing")

CHROMIUM = "/usr/bin/chromium"
# ``berth serve``'s default: one per core, at most 4 (the tools do not import the cli layer).
DEFAULT_WORKERS = min(4, os.cpu_count() or 1)
CONSUMERS_PER_REQUEST = 500
PAGE_TIMEOUT_MS = 60_000
ENDPOINTS = (
    "/berth/dashboard/totals",
    "/berth/dashboard/rankings",
    "/berth/dashboard/summary",
    "/berth/dashboard/providers",
    "/berth/dashboard/providers?sort=usage",
    "/berth/dashboard/providers?sort=usage&above=90",
)

# Set by the page itself: the moment (ms from the navigation's start) of the first frame painted
# after a row of the capacity table is in the document and shown; and the moment the rankings are in.
FIRST_NUMBERS_PROBE = """
(() => {
  const shown = () => {
    const row = document.querySelector("#classes tbody tr");
    return row && !document.getElementById("content").hidden;
  };
  const observer = new MutationObserver(() => {
    if (window.__firstNumbers !== undefined || !shown()) return;
    window.__firstNumbers = null;
    observer.disconnect();
    requestAnimationFrame(() => setTimeout(() => { window.__firstNumbers = performance.now(); }, 0));
  });
  observer.observe(document, { childList: true, subtree: true, attributes: true });
  const rankings = new MutationObserver(() => {
    if (window.__rankings !== undefined || !document.querySelector("#fullest tbody tr")) return;
    window.__rankings = performance.now();
    rankings.disconnect();
  });
  rankings.observe(document, { childList: true, subtree: true });
})();
"""


def _consumer(host: str, n: int, projects: int) -> dict[str, Any]:
    """A consumer of varied size on ``host``, so that the rankings have something to rank."""
    size = 1 + n % 8
    return {
        "allocations": {host: {"resources": {"VCPU": size, "MEMORY_MB": 1024 * size, "DISK_GB": 10 * size}}},
        "project_id": f"project-{n % projects}",
        "user_id": "dashboard-timing",
        "consumer_generation": None,
        "consumer_type": "INSTANCE",
    }


def build(client: Client, hosts: int, consumers_per_host: int, projects: int, threads: int, stop: Stop) -> None:
    """Create ``hosts`` hosts and their consumers through the API."""
    started = time.perf_counter()

    def spec(i: int) -> ProviderSpec:
        gpu = [ProviderSpec(f"cn-{i}-gpu", inventory=GPU_INVENTORY)] if i % 5 == 0 else []
        return ProviderSpec(f"cn-{i}", inventory=HOST_INVENTORY, children=gpu)

    made = parallel(
        range(hosts),
        threads,
        lambda i: create_tree(client, spec(i)),
        stop,
        client=client,
        progress=lambda done: log(f"  hosts built: {done}/{hosts}"),
    )
    host_uuids = [tree[0] for tree in made]
    total = hosts * consumers_per_host
    batches = [
        range(start, min(start + CONSUMERS_PER_REQUEST, total)) for start in range(0, total, CONSUMERS_PER_REQUEST)
    ]

    def write(batch: range) -> None:
        body = {str(uuidlib.uuid4()): _consumer(host_uuids[n % hosts], n, projects) for n in batch}
        client.call("POST", "/allocations", body, expect=(204,))

    parallel(batches, threads, write, stop, client=client)
    log(f"built {hosts} hosts and {total} consumers in {time.perf_counter() - started:.0f} s")


def first_paint(browser: Any, url: str) -> tuple[float, float, float]:
    """One load of the page in a fresh context: ms from navigation start to the first paint of the
    capacity table, as the page's clock has it; ms of wall time around the navigation and that wait;
    ms from navigation start until the rankings are drawn too.

    The page is closed only once its rankings are in, so that the next load finds the server idle
    rather than still reading the rankings for a page that is gone."""
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    try:
        page = context.new_page()
        page.add_init_script(FIRST_NUMBERS_PROBE)
        started = time.perf_counter()
        page.goto(f"{url}/dashboard", wait_until="commit")
        page.wait_for_function("typeof window.__firstNumbers === 'number'", timeout=PAGE_TIMEOUT_MS, polling=10)
        wall = (time.perf_counter() - started) * 1000
        painted: float = page.evaluate("window.__firstNumbers")
        page.wait_for_function("typeof window.__rankings === 'number'", timeout=PAGE_TIMEOUT_MS, polling=10)
        ranked: float = page.evaluate("window.__rankings")
        return painted, wall, ranked
    finally:
        context.close()


def endpoint_times(client: Client, runs: int) -> dict[str, float | None]:
    """Median ms of each JSON endpoint (None when the server does not have it)."""
    times: dict[str, float | None] = {}
    for path in ENDPOINTS:
        samples = []
        for _ in range(runs):
            started = time.perf_counter()
            status = client.request("GET", path).status_code
            samples.append((time.perf_counter() - started) * 1000)
            if status != 200:
                break
        times[path] = statistics.median(samples) if status == 200 else None
    return times


def _describe(name: str, runs: list[tuple[float, float, float]]) -> None:
    painted, wall, ranked = ([run[k] for run in runs] for k in range(3))
    log(
        f"{name}: first paint (page clock) ms {', '.join(f'{p:.0f}' for p in painted)}; "
        f"median {statistics.median(painted):.0f}, max {max(painted):.0f}; "
        f"wall ms {', '.join(f'{w:.0f}' for w in wall)}; "
        f"rankings drawn at ms {', '.join(f'{r:.0f}' for r in ranked)}"
    )


def measure(args: argparse.Namespace, database_file: str, logdir: str) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    server = Server(f"sqlite:///{database_file}", args.workers, logdir)
    fresh = not os.path.exists(database_file)
    server.start()
    stop = Stop()
    try:
        if fresh:
            client = Client(server.url, timeout=300.0)
            try:
                build(client, args.hosts, args.consumers_per_host, args.projects, args.threads, stop)
            finally:
                client.close()
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
            try:
                cold = []
                for _ in range(args.runs):
                    server.stop()
                    server.start()
                    cold.append(first_paint(browser, server.url))
                _describe("cold", cold)
                first_paint(browser, server.url)
                warm = [first_paint(browser, server.url) for _ in range(args.runs)]
                _describe("warm", warm)
            finally:
                browser.close()
        client = Client(server.url, timeout=300.0)
        try:
            endpoints = endpoint_times(client, args.runs)
        finally:
            client.close()
        for path, ms in endpoints.items():
            log(f"{path}: median {'-' if ms is None else f'{ms:.0f}'} ms")
        return {"cold": cold, "warm": warm, "endpoints": endpoints}
    finally:
        stop.set()
        server.stop()


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m berth.testbed.dashboard_timing", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--consumers-per-host", type=int, default=3)
    parser.add_argument("--projects", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5, help="cold runs, and warm runs")
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS)
    parser.add_argument("--threads", type=int, default=8, help="clients building the cloud")
    parser.add_argument("--database-file", help="SQLite file to reuse (built when missing); default: a temporary one")
    parser.add_argument("--chromium", default=CHROMIUM)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None, run: Callable[..., dict[str, Any]] = measure) -> int:
    args = parse(argv)
    with tempfile.TemporaryDirectory(prefix="berth-dashboard-timing-") as tmpdir:
        database_file = os.path.abspath(args.database_file or os.path.join(tmpdir, "placement.sqlite"))
        run(args, database_file, tmpdir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
