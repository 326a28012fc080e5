"""The operator's commands of the conductors' API (``berth conductor``): servers and their actions,
flavors, hosts, server groups, operations; one module per noun."""

from __future__ import annotations

import click

from berth.cli.compute import actions  # noqa: F401 - adds the action commands to the server group
from berth.cli.compute.server_groups import server_groups_group
from berth.cli.compute.servers import servers_group

COMPUTE_COMMANDS: list[click.Command] = [
    servers_group,
    server_groups_group,
]
