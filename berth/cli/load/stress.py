"""``berth stress``: its options.  The run itself is :mod:`berth.testbed.stress` (docs/reliability.md)."""

from __future__ import annotations

from typing import Any

import click

from berth.cli.load.report_file import ReportFile
from berth.testbed.stress.config import FAULTS, StressConfig

POSITIVE_INT = click.IntRange(min=1)
POSITIVE_FLOAT = click.FloatRange(min=0, min_open=True)


@click.command(
    "stress",
    short_help="Race claimers, inject faults, audit (see docs/reliability.md).",
    help="Run concurrent claimer processes that race for the last units of small providers, "
    "optionally inject a fault, then audit every provider and consumer over HTTP. Exits "
    "non-zero on any violation (over-commit, lost or partial write, 500, non-JSON error). "
    "See docs/reliability.md.",
)
@click.option(
    "--url", default=None, metavar="URL", help="base URL of a running server (loopback only); default: start one"
)
@click.option(
    "--database",
    default=None,
    metavar="DB",
    help="database of the server this run starts: 'sqlite' (default, a fresh "
    "file), 'postgresql' (a throwaway PostgreSQL, needs the PostgreSQL server "
    "programs) or a SQLAlchemy URL",
)
@click.option(
    "--workers",
    type=POSITIVE_INT,
    default=4,
    metavar="N",
    help="worker processes of the server this run starts (default 4)",
)
@click.option(
    "--servers",
    type=POSITIVE_INT,
    default=1,
    metavar="N",
    help="berth serve processes this run starts on the one database, the claimers spread over them (default 1)",
)
@click.option(
    "--postgres-nodes",
    type=click.IntRange(min=2),
    default=2,
    metavar="N",
    help="--fault failover: PostgreSQL nodes of the Patroni cluster the run starts (default 2)",
)
@click.option(
    "--concurrency",
    "-c",
    type=POSITIVE_INT,
    default=8,
    metavar="N",
    help="concurrent claimer processes (default 8)",
)
@click.option("--seconds", type=POSITIVE_FLOAT, default=30.0, metavar="S", help="duration of the load (default 30)")
@click.option(
    "--operations", type=POSITIVE_INT, default=None, metavar="N", help="rounds per claimer instead of a duration"
)
@click.option(
    "--providers",
    type=POSITIVE_INT,
    default=20,
    metavar="P",
    help="compute hosts (default 20), plus nested GPU children and one sharing DISK_GB provider",
)
@click.option(
    "--fault", type=click.Choice(FAULTS), default="none", help="fault injected during the load (default none)"
)
@click.option(
    "--fault-count",
    type=POSITIVE_INT,
    default=1,
    metavar="N",
    help="how many times, evenly spread over the run (default 1)",
)
@click.option(
    "--down-seconds",
    type=float,
    default=1.0,
    metavar="S",
    help="kill-server / restart-postgres: time the server stays down (default 1)",
)
@click.option(
    "--server-pid",
    type=int,
    default=None,
    metavar="PID",
    help="with --url and --fault kill-worker: pid of the server's master process",
)
@click.option(
    "--picks",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    metavar="SHARE",
    help="share of rounds that are POST /berth/pick with a lease, confirmed, left to expire or released "
    "(default 0.15 with --fault failover, else 0)",
)
@click.option("--seed", type=int, default=None, metavar="N", help="random seed (default: random)")
@click.option("--keep", is_flag=True, help="with --url: leave the providers and consumers of the run behind")
@click.option("--json", default=None, type=ReportFile(), help="also write the summary as JSON")
@click.option("--server-log", default=None, metavar="FILE", help="copy the log of the server this run started to FILE")
def stress_command(**options: Any) -> int:
    # Imported here: every `berth` command (the server too) imports this module for its options.
    from berth.testbed.stress.runner import main

    status = main(StressConfig(**options))
    if status:
        raise click.exceptions.Exit(status)
    return status
