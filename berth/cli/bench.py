"""``berth bench``: its options.  The benchmark itself is :mod:`berth.testbed.bench` (docs/performance.md)."""

from __future__ import annotations

import argparse

from berth.cli import harness
from berth.testbed.bench.config import BenchConfig


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
        "candidate latency, concurrent claims, pick and claim against the client-side loop and (for a "
        "server it started) memory. Without --url it "
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
        "'postgresql' for a throwaway PostgreSQL (needs the PostgreSQL server "
        "programs); default: a fresh SQLite file in a temp dir",
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
    parser.add_argument(
        "--pick-clients",
        type=harness.positive_int,
        default=16,
        help="concurrent threads placing servers in the pick-and-claim phase, with POST /berth/pick "
        "and then with the client-side loop (default 16)",
    )
    parser.add_argument(
        "--pick-seconds",
        type=harness.positive_float,
        default=10.0,
        help="duration of each of the pick-and-claim phase's four runs (pick and client-side loop, "
        "servers and anti-affinity groups) in seconds (default 10)",
    )
    parser.add_argument(
        "--group-size",
        type=harness.positive_int,
        default=10,
        help="members of each anti-affinity group of the pick-and-claim phase (default 10)",
    )
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the results as JSON")


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    return BenchConfig(
        url=args.url,
        database=args.database,
        workers=args.workers,
        hosts=args.hosts,
        queries=args.queries,
        clients=args.clients,
        claims_seconds=args.claims_seconds,
        create_clients=args.create_clients,
        allocations=args.allocations,
        pick_clients=args.pick_clients,
        pick_seconds=args.pick_seconds,
        group_size=args.group_size,
        json=args.json,
    )


def run(args: argparse.Namespace) -> int:
    # Imported here: every `berth` command (the server too) imports this module for its options.
    from berth.testbed.bench.runner import run_bench

    return run_bench(config_from_args(args))
