"""``berth sim``: a simulated cloud driven through the conductor, with faults, ending with the
books' invariants checked (docs/sim.md)."""

from __future__ import annotations

from typing import Any

import click

from berth.cli.load.report_file import ReportFile


@click.command("sim", help="Simulate a cloud: hosts, a seeded mix of server operations, faults; check the books.")
@click.option("--hosts", type=click.IntRange(6), default=1000, show_default=True)
@click.option("--ops", type=click.IntRange(1), default=20000, show_default=True, help="operations to run")
@click.option("--concurrency", type=click.IntRange(1), default=16, show_default=True, help="operations at once")
@click.option(
    "--faults", type=click.FloatRange(0.0, 1.0), default=0.05, show_default=True, help="fault chance per operation"
)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option(
    "--database",
    default=None,
    metavar="URL",
    help="sqlite (default), postgresql (a throwaway one), patroni (a Patroni cluster, failovers as faults), or a URL",
)
@click.option("--workers", type=click.IntRange(1), default=3, show_default=True, help="berth serve's workers")
@click.option(
    "--conductors",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help="berth conductor processes (0: one per core)",
)
@click.option(
    "--real-agents", type=click.IntRange(0), default=4, show_default=True, help="hosts run as agent processes"
)
@click.option("--pools", type=click.IntRange(1), default=1, show_default=True, help="processes sharing the other hosts")
@click.option(
    "--instances-per-host",
    type=click.FloatRange(0.1),
    default=2.5,
    show_default=True,
    help="live servers per host the workload aims at (past what the hosts hold, the cloud fills)",
)
@click.option(
    "--preemptible",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    help="the share of builds of preemptible flavors (priority 0); the others preempt (priority 10)",
)
@click.option(
    "--quota",
    type=click.FloatRange(0.0, min_open=True),
    default=None,
    help="the run's project's VCPU limit, as a share of the cloud's VCPUs, enforced on every allocation write",
)
@click.option("--json", "json_path", default=None, type=ReportFile(), help="write the report as JSON")
@click.option(
    "--keep-files",
    is_flag=True,
    help="keep the run's folder (logs, databases) after a clean run too; a run with a problem keeps it anyway",
)
def sim_command(json_path: str | None, **params: Any) -> None:
    from berth.testbed.sim.config import SimConfig
    from berth.testbed.sim.run import main

    try:
        config = SimConfig(json=json_path, **params)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    status = main(config)
    if status:
        raise click.exceptions.Exit(status)
