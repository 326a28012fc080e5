"""The client commands of ``berth``: one module per noun, against any Placement-compatible endpoint."""

from __future__ import annotations

import click

from berth.cli.client.allocations import allocation_group
from berth.cli.client.candidates import candidates_command
from berth.cli.client.inventory import inventory_group
from berth.cli.client.leases import lease_group
from berth.cli.client.providers import provider_group
from berth.cli.client.quotas import quota_group
from berth.cli.client.traits import trait_group
from berth.cli.client.usage import usage_group

CLIENT_COMMANDS: list[click.Command] = [
    provider_group,
    inventory_group,
    trait_group,
    usage_group,
    allocation_group,
    candidates_command,
    lease_group,
    quota_group,
]
