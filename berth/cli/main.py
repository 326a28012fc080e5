"""The ``berth`` command: a Click group of the server's, the agent's and the client's commands."""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Sequence
from typing import Final

import click

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 120}

# Each command's module, imported when the command runs (or a help lists it), not at every start
# of ``berth``: all of them took 0.9 s of CPU to import, which every call of the client commands
# and every conductor process paid (started again after a crash, in the simulator's faults too),
# for the one command it runs. ``tests/test_cli_commands.py`` checks the list against the modules.
COMMANDS: Final[dict[str, str]] = {
    "agent": "berth.cli.services.agent:agent_command",
    "allocation": "berth.cli.client.allocations:allocation_group",
    "audit": "berth.cli.audit:audit_command",
    "bench": "berth.cli.load.bench:bench_command",
    "candidates": "berth.cli.client.candidates:candidates_command",
    "cloud": "berth.cli.services.cloud:cloud_command",
    "compare": "berth.cli.books:compare_command",
    "conductor": "berth.cli.services.conductor:conductor_command",
    "export": "berth.cli.books:export_command",
    "flavor": "berth.cli.compute.flavors:flavor_group",
    "host": "berth.cli.compute.hosts:host_group",
    "import": "berth.cli.books:import_command",
    "inventory": "berth.cli.client.inventory:inventory_group",
    "lease": "berth.cli.client.leases:lease_group",
    "operation": "berth.cli.compute.operations:operation_group",
    "provider": "berth.cli.client.providers:provider_group",
    "quota": "berth.cli.client.quotas:quota_group",
    "serve": "berth.cli.services.serve:serve_command",
    "server": "berth.cli.compute.actions:servers_group",  # with the actions it adds
    "server-group": "berth.cli.compute.server_groups:server_groups_group",
    "sim": "berth.cli.load.sim:sim_command",
    "stress": "berth.cli.load.stress:stress_command",
    "trait": "berth.cli.client.traits:trait_group",
    "usage": "berth.cli.client.usage:usage_group",
}


class LazyGroup(click.Group):
    """A group whose commands (``COMMANDS``) are imported by name when asked for (Click's pattern
    for loading subcommands lazily)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return super().get_command(ctx, cmd_name)
        module, attribute = target.split(":")
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup, context_settings=CONTEXT, help="Berth: the resource books of a cloud.")
@click.version_option(package_name="berth", prog_name="berth", message="%(prog)s %(version)s")
def cli() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    # Alembic says at INFO which of its plugins it set up, once per process that imports it (a
    # command imports it after this point, its module being loaded when the command runs).
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)


@cli.group("db", help="Database administration.")
def db_group() -> None:
    pass


@db_group.command("upgrade", help="Create or upgrade the schema and load the standard names.")
@click.option(
    "--database",
    default=None,
    metavar="URL",
    help="SQLAlchemy database URL (default: $BERTH_DATABASE_URL, else a SQLite file "
    "berth.sqlite in the current folder)",
)
def db_upgrade(database: str | None) -> int:
    from berth.store.database import Database, default_url, refuse_in_memory
    from berth.store.migrate import upgrade

    refuse_in_memory(database or default_url())
    db = Database(database or default_url())
    upgrade(db)
    db.dispose()
    click.echo(f"database at {db.engine.url.render_as_string(hide_password=True)} is up to date")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``berth``; the exit status is returned (a usage error is 2, as everywhere in Click)."""
    try:
        result = cli.main(args=list(argv) if argv is not None else None, prog_name="berth", standalone_mode=False)
    except click.ClickException as error:
        error.show()
        return error.exit_code
    except click.Abort:
        click.echo("Aborted.", err=True)
        return 1
    except Exception as error:
        # A wrong --database or a database that is down: the operator's to fix, said in one line.
        # (Only a command that opened a database imported the module that raises it.)
        database = sys.modules.get("berth.store.database")
        if database is None or not isinstance(error, database.DatabaseUnusable):
            raise
        click.echo(f"berth: {error}", err=True)
        return 1
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
