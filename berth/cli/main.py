"""The ``berth`` command: a Click group of the server's, the agent's and the client's commands."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

import click

from berth.cli import agent, audit, bench, cloud, conductor, serve, sim, stress
from berth.cli.books import BOOKS_COMMANDS
from berth.cli.client import CLIENT_COMMANDS
from berth.cli.compute import COMPUTE_COMMANDS
from berth.store.database import DatabaseUnusable

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 120}


@click.group(context_settings=CONTEXT, help="Berth: the resource books of a cloud.")
@click.version_option(package_name="berth", prog_name="berth", message="%(prog)s %(version)s")
def cli() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")


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
    from berth.store.database import Database, default_url
    from berth.store.migrate import upgrade

    db = Database(database or default_url())
    upgrade(db)
    db.dispose()
    click.echo(f"database at {db.engine.url.render_as_string(hide_password=True)} is up to date")
    return 0


cli.add_command(serve.serve_command)
cli.add_command(agent.agent_command)
cli.add_command(conductor.conductor_command)
cli.add_command(cloud.cloud_command)
cli.add_command(bench.bench_command)
cli.add_command(stress.stress_command)
cli.add_command(sim.sim_command)
cli.add_command(audit.audit_command)
for client_command in [*CLIENT_COMMANDS, *COMPUTE_COMMANDS, *BOOKS_COMMANDS]:
    cli.add_command(client_command)


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
    except DatabaseUnusable as error:
        # A wrong --database or a database that is down: the operator's to fix, said in one line.
        click.echo(f"berth: {error}", err=True)
        return 1
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
