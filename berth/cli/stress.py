"""``berth stress``: its options.  The run itself is :mod:`berth.testbed.stress` (docs/reliability.md)."""

from __future__ import annotations

import argparse

from berth.cli import harness
from berth.testbed.stress.config import FAULTS, StressConfig


def add_stress_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run concurrent claimer processes that race for the last units of small providers, "
        "optionally inject a fault, then audit every provider and consumer over HTTP. Exits "
        "non-zero on any violation (over-commit, lost or partial write, 500, non-JSON error). "
        "See docs/reliability.md."
    )
    parser.add_argument("--url", default=None, help="base URL of a running server (loopback only); default: start one")
    parser.add_argument(
        "--database",
        default=None,
        help="database of the server this run starts: 'sqlite' (default, a fresh "
        "file), 'postgresql' (a throwaway PostgreSQL, needs the PostgreSQL server "
        "programs) or a SQLAlchemy URL",
    )
    parser.add_argument(
        "--workers",
        type=harness.positive_int,
        default=4,
        help="worker processes of the server this run starts (default 4)",
    )
    parser.add_argument(
        "--concurrency", "-c", type=harness.positive_int, default=8, help="concurrent claimer processes (default 8)"
    )
    parser.add_argument(
        "--seconds", type=harness.positive_float, default=30.0, help="duration of the load (default 30)"
    )
    parser.add_argument(
        "--operations", type=harness.positive_int, default=None, help="rounds per claimer instead of a duration"
    )
    parser.add_argument(
        "--providers",
        type=harness.positive_int,
        default=20,
        help="compute hosts (default 20), plus nested GPU children and one sharing DISK_GB provider",
    )
    parser.add_argument("--fault", choices=FAULTS, default="none", help="fault injected during the load (default none)")
    parser.add_argument(
        "--fault-count",
        type=harness.positive_int,
        default=1,
        help="how many times, evenly spread over the run (default 1)",
    )
    parser.add_argument(
        "--down-seconds",
        type=float,
        default=1.0,
        help="kill-server / restart-postgres: time the server stays down (default 1)",
    )
    parser.add_argument(
        "--server-pid",
        type=int,
        default=None,
        help="with --url and --fault kill-worker: pid of the server's master process",
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    parser.add_argument(
        "--keep", action="store_true", help="with --url: leave the providers and consumers of the run behind"
    )
    parser.add_argument("--json", default=None, metavar="FILE", help="also write the summary as JSON")
    parser.add_argument(
        "--server-log", default=None, metavar="FILE", help="copy the log of the server this run started to FILE"
    )


def config_from_args(args: argparse.Namespace) -> StressConfig:
    return StressConfig(
        url=args.url,
        database=args.database,
        workers=args.workers,
        concurrency=args.concurrency,
        seconds=args.seconds,
        operations=args.operations,
        providers=args.providers,
        fault=args.fault,
        fault_count=args.fault_count,
        down_seconds=args.down_seconds,
        server_pid=args.server_pid,
        seed=args.seed,
        keep=args.keep,
        json=args.json,
        server_log=args.server_log,
    )


def run(args: argparse.Namespace) -> int:
    # Imported here: every `berth` command (the server too) imports this module for its options.
    from berth.testbed.stress.runner import main

    return main(config_from_args(args))
