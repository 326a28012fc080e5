"""The operator's commands of the conductors' API (``berth conductor``): servers and their actions,
flavors, hosts, server groups, operations; one module per noun."""

from __future__ import annotations

import click

from berth.cli.compute import actions  # noqa: F401 - adds the action commands to the server group
from berth.cli.compute.flavors import flavor_group
from berth.cli.compute.hosts import host_group
from berth.cli.compute.operations import operation_group
from berth.cli.compute.server_groups import server_groups_group
from berth.cli.compute.servers import servers_group

COMPUTE_COMMANDS: list[click.Command] = [
    servers_group,
    flavor_group,
    host_group,
    server_groups_group,
    operation_group,
]
