"""``berth bench``: its options.  The benchmark itself is :mod:`berth.testbed.bench` (docs/performance.md)."""

from __future__ import annotations

from typing import Any

import click

from berth.cli.harness import DEFAULT_WORKERS
from berth.cli.load.report_file import ReportFile
from berth.testbed.bench.config import BenchConfig

POSITIVE_INT = click.IntRange(min=1)
POSITIVE_FLOAT = click.FloatRange(min=0, min_open=True)


class HostCounts(click.ParamType[list[int]]):
    """``N[,N...]``: positive host counts, one run each; ``_`` may group digits (``10_000``)."""

    name = "N[,N...]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> list[int]:
        if isinstance(value, list):  # the default, already converted
            return value
        text = str(value)
        try:
            counts = [int(part.strip().replace("_", "")) for part in text.split(",") if part.strip()]
        except ValueError:
            self.fail(f"expected N[,N...], got {text!r}", param, ctx)
        if not counts or any(c < 1 for c in counts):
            self.fail(f"host counts must be positive integers, got {text!r}", param, ctx)
        return counts


class GangSizes(HostCounts):
    """``N[,N...]``: gang sizes, each from 1 to the most consumers one gang may name."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> list[int]:
        from berth.store.pick.gang.plan import MAX_GANG

        sizes = super().convert(value, param, ctx)
        if any(size > MAX_GANG for size in sizes):
            self.fail(f"gang sizes must be at most {MAX_GANG}, got {value!r}", param, ctx)
        return sizes


@click.command(
    "bench",
    short_help="Benchmark a server over HTTP (see docs/performance.md).",
    help="Build a synthetic cloud through the HTTP API, then measure provider creation, allocation "
    "candidate latency, concurrent claims, pick and claim against the client-side loop, gangs and "
    "(for a server it started) memory. Without --url it starts its own `berth serve` on a free loopback "
    "port, with a fresh database per host count.",
)
@click.option(
    "--url",
    default=None,
    metavar="URL",
    help="base URL of an already running server (loopback only); the bench then "
    "removes what it created after each host count",
)
@click.option(
    "--database",
    default=None,
    metavar="DB",
    help="database of the server the bench starts: a SQLAlchemy URL, or "
    "'postgresql' for a throwaway PostgreSQL (needs the PostgreSQL server "
    "programs); default: a fresh SQLite file in a temp dir",
)
@click.option(
    "--workers",
    type=POSITIVE_INT,
    default=DEFAULT_WORKERS,
    metavar="N",
    help="worker processes of the server the bench starts (default: as berth serve, "
    f"one per core, at most 4: {DEFAULT_WORKERS} here)",
)
@click.option("--hosts", type=HostCounts(), default=[1000], help="compute host counts, one run each (default 1000)")
@click.option(
    "--queries",
    type=POSITIVE_INT,
    default=200,
    metavar="N",
    help="timed GET /allocation_candidates per variant (default 200)",
)
@click.option("--clients", type=POSITIVE_INT, default=8, metavar="N", help="concurrent claiming threads (default 8)")
@click.option(
    "--claims-seconds",
    type=POSITIVE_FLOAT,
    default=10.0,
    metavar="S",
    help="duration of the claims phase in seconds (default 10)",
)
@click.option(
    "--create-clients",
    type=POSITIVE_INT,
    default=8,
    metavar="N",
    help="concurrent threads building the layout (default 8)",
)
@click.option(
    "--allocations",
    type=click.IntRange(min=0),
    default=0,
    metavar="N",
    help="allocation records (one per consumer and resource class) written with "
    "POST /allocations after the layout and before the measurements (default 0)",
)
@click.option(
    "--pick-clients",
    type=POSITIVE_INT,
    default=16,
    metavar="N",
    help="concurrent threads placing servers in the pick-and-claim phase, with POST /berth/pick "
    "and then with the client-side loop (default 16)",
)
@click.option(
    "--pick-seconds",
    type=POSITIVE_FLOAT,
    default=10.0,
    metavar="S",
    help="duration of each of the pick-and-claim phase's four runs (pick and client-side loop, "
    "servers and anti-affinity groups) in seconds (default 10)",
)
@click.option(
    "--group-size",
    type=POSITIVE_INT,
    default=10,
    metavar="N",
    help="members of each anti-affinity group of the pick-and-claim phase (default 10)",
)
@click.option(
    "--gang-clients",
    type=POSITIVE_INT,
    default=16,
    metavar="N",
    help="concurrent threads posting gangs in the gang phase (default 16)",
)
@click.option(
    "--gang-seconds",
    type=POSITIVE_FLOAT,
    default=10.0,
    metavar="S",
    help="duration of each of the gang phase's runs (four per gang size: plain, within a rack, "
    "spread over the zones, anti-affinity) in seconds (default 10)",
)
@click.option(
    "--gang-sizes",
    type=GangSizes(),
    default=[10, 100],
    help="members of the gangs of the gang phase, one set of runs each (default 10,100)",
)
@click.option("--json", default=None, type=ReportFile(), help="also write the results as JSON")
def bench_command(**options: Any) -> int:
    # Imported here: every `berth` command (the server too) imports this module for its options.
    from berth.testbed.bench.runner import run_bench

    status = run_bench(BenchConfig(**options))
    if status:
        raise click.exceptions.Exit(status)
    return status
