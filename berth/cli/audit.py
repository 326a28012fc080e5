"""``berth audit``: the cloud's books checked across the service and every agent, and with
``--heal`` repaired through the agents (docs/audit.md). Exit status 1 when something is found
that is not healed."""

from __future__ import annotations

from collections.abc import Iterable

import click
from rich.console import RenderableType
from rich.text import Text

from berth.cli.client.connection import Given, explain_failure
from berth.cli.client.output import emit, table
from berth.clients.agent import AgentClient
from berth.clients.errors import PlacementError
from berth.clients.placement import PlacementClient
from berth.conductor.audit import CloudFinding, CloudReport, audit_cloud

# The service as this command is given it, for the hints of its failures.
_GIVEN = Given(url="--placement (or $BERTH_URL)", token="--token (or set $BERTH_TOKEN)")


def _agent_urls(value: str) -> list[str]:
    return [url.strip() for url in value.split(",") if url.strip()]


@click.command(
    "audit",
    help="Check the service's allocations, inventories and leases against every agent's claims and guests: "
    "allocations nobody owns, instances on two hosts, providers over capacity, agents that disagree. "
    "Exit status 1 when something is found (and, with --heal, not healed).",
)
@click.option("--placement", "placement_url", required=True, metavar="URL", envvar="BERTH_URL", help="the service")
@click.option("--token", default="admin", envvar="BERTH_TOKEN", help="token for the service (default: admin)")
@click.option(
    "--agents",
    "agent_urls",
    default="",
    metavar="URL,...",
    help="every compute agent of the cloud, comma-separated: allocations on a host whose agent is not given "
    "are owned by nobody",
)
@click.option("--agent-token", default=None, envvar="BERTH_AGENT_TOKEN", help="token for the agents")
@click.option("--heal", is_flag=True, help="repair what the agents can repair, and list what needs an operator")
@click.option("-f", "--format", "output", type=click.Choice(["table", "json"]), default="table", show_default=True)
def audit_command(
    placement_url: str, token: str, agent_urls: str, agent_token: str | None, heal: bool, output: str
) -> None:
    placement = PlacementClient(placement_url, token, roles=())  # an operator's: the token's roles alone
    agents = [AgentClient(url, token=agent_token) for url in _agent_urls(agent_urls)]
    try:
        report = audit_cloud(placement, agents, heal=heal)
    except PlacementError as error:
        raise explain_failure(error, placement_url, _GIVEN) from None
    emit(output, report.to_dict(), lambda: _render(report))
    if not report.consistent:
        raise click.exceptions.Exit(1)


def _render(report: CloudReport) -> Iterable[RenderableType]:
    if not report.findings:
        yield Text("nothing found: the service and the agents agree")
        return
    rows = []
    for f in report.findings:
        subject = f.consumer_uuid or f.provider_uuid or "-"
        if f.resource_class:
            subject += f" {f.resource_class}"
        kind = f.kind + (f" ({f.agent_kind})" if f.agent_kind else "")
        rows.append((kind, subject, ", ".join(f.hosts) or "-", f.detail, _outcome(report, f)))
    yield table("findings", ("kind", "consumer / provider", "hosts", "detail", "outcome"), rows)
    if report.residual:
        yield table(
            "needs an operator",
            ("kind", "detail", "why"),
            (
                (f.kind, f.detail, f.operator or ("not healed" if report.heal else "run with --heal"))
                for f in report.residual
            ),
        )
    healed = sum(f.healed for f in report.findings)
    yield Text(f"{len(report.findings)} found, {healed} healed, {len(report.residual)} left")


def _outcome(report: CloudReport, finding: CloudFinding) -> str:
    if finding.healed:
        return "healed"
    if not report.heal and finding.operator is None:
        return "found (healable)"
    return "needs an operator"
