"""``berth export``, ``berth import`` and ``berth compare``: copies of the books, and moving an existing
OpenStack Placement onto Berth (docs/backup.md, docs/moving-from-placement.md)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from berth.cli.client.connection import Given, explain_failure
from berth.migration import Auth, MigrationError, Unreadable, compare, load_into_berth, read_placement
from berth.portability.format import BooksConflict, BooksFileError, TargetNotEmpty
from berth.portability.importer import import_books
from berth.store.database import Database, default_url, refuse_in_memory
from berth.store.migrate import upgrade

_DATABASE_HELP = "SQLAlchemy URL of Berth's database (default: $BERTH_DATABASE_URL, else berth.sqlite here)"
_TOKEN_HELP = "token sent as X-Auth-Token (default: admin, the development mode's)"

ProgressCallback = Callable[[str, int, int], None]


@contextmanager
def _progress_bars() -> Iterator[ProgressCallback]:
    """A progress bar per kind of record, on standard error, for work reported as (kind, done, total).

    Only on a terminal: written to a file or a pipe, the bars would come out as one line per kind and
    redraw; the summary line the commands print at the end says what was done.
    """
    console = Console(stderr=True)
    bars = Progress(
        TextColumn("{task.description:<22}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
        disable=not console.is_terminal,
    )
    tasks: dict[str, TaskID] = {}

    def report(kind: str, done: int, total: int) -> None:
        if kind not in tasks:
            tasks[kind] = bars.add_task(kind, total=total or None)
        bars.update(tasks[kind], completed=done, total=total or None)

    with bars:
        yield report


def _summary(counts: dict[str, int]) -> str:
    return ", ".join(f"{count} {kind}" for kind, count in counts.items() if count)


@click.command("export", help="Write the books of Berth's database to FILE (JSON Lines; - for standard output).")
@click.argument("file", type=click.File("w", encoding="utf-8", lazy=True))
@click.option("--database", default=None, metavar="URL", help=_DATABASE_HELP)
def export_command(file: IO[str], database: str | None) -> None:
    from berth.portability.export import NoBooks, export_books

    try:
        with _progress_bars() as progress:
            counts = export_books(database or default_url(), file, progress)
    except NoBooks as error:
        raise click.ClickException(f"{error}: check --database (or $BERTH_DATABASE_URL)") from None
    click.echo(f"exported {_summary(counts) or 'nothing'}", err=True)


@click.command(
    "import",
    help="Load FILE (written by berth export) into Berth's database in one transaction, or with "
    "--from-placement read a running OpenStack Placement through its API and load its books.",
)
@click.argument("file", type=click.File("r", encoding="utf-8"), required=False)
@click.option("--database", default=None, metavar="URL", help=_DATABASE_HELP)
@click.option("--merge", is_flag=True, help="load into a database that has books already, keeping what matches")
@click.option("--from-placement", "placement_url", default=None, metavar="URL", help="the Placement endpoint to read")
@click.option("--token", default="admin", help=_TOKEN_HELP)
def import_command(
    file: IO[str] | None, database: str | None, merge: bool, placement_url: str | None, token: str
) -> None:
    target = database or default_url()
    refuse_in_memory(target)
    if (file is None) == (placement_url is None):
        raise click.UsageError("give either FILE or --from-placement URL")
    if merge and placement_url is not None:
        raise click.UsageError("--merge applies to FILE only: a move from Placement needs an empty database")
    try:
        with _progress_bars() as progress:
            if placement_url is not None:
                books = read_placement(placement_url, token=token, progress=progress)
                loaded = load_into_berth(books, target, progress=progress)
                click.echo(f"loaded {_summary(dataclasses.asdict(loaded)) or 'nothing'} from {placement_url}", err=True)
                return
            assert file is not None
            counts = _import_file(target, file, merge, progress)
    except Unreadable as error:
        failure = explain_failure(
            error.error, error.url, Given(url="--from-placement", token="--token", not_found=None)
        )
        raise click.ClickException(f"{failure.message}\nNothing was written.") from None
    except TargetNotEmpty as error:
        raise click.ClickException(f"{_sentence(error)} Import into an empty database, or give --merge.") from None
    except (BooksFileError, BooksConflict, MigrationError) as error:
        raise click.ClickException(f"{_sentence(error)} Nothing was written.") from None
    if merge:
        click.echo(
            f"merged: added {_summary(counts) or 'nothing'}; the file's other records were there already", err=True
        )
    else:
        click.echo(f"imported {_summary(counts) or 'nothing'}", err=True)


def _sentence(error: Exception) -> str:
    """The error's message as a sentence, for the advice that follows it."""
    text = str(error).rstrip()
    return text if text.endswith((".", "!", "?")) else text + "."


def _import_file(target: str, file: IO[str], merge: bool, progress: ProgressCallback) -> dict[str, int]:
    """The schema is created or upgraded first, as ``berth serve`` does, then the file loaded."""
    db = Database(target)
    try:
        upgrade(db)
        return import_books(db, file, merge=merge, progress=progress)
    finally:
        db.dispose()


# compare's exit statuses besides 0, as its help says: a script tells "the books differ" from "they
# could not be compared" (2, Click's own for a usage error).
DIFFERENT, FAILED = 1, 2


@click.command(
    "compare",
    help="Read two Placement-compatible endpoints through their API and list every difference. "
    "Exit status 0 when they hold the same books, 1 when they differ, 2 when they could not be "
    "compared (a usage error, an endpoint that does not answer or refuses the token).",
)
@click.argument("first_url")
@click.argument("second_url")
@click.option("--token", default="admin", help=_TOKEN_HELP)
@click.option("--second-token", default=None, help="token for SECOND_URL (default: --token)")
def compare_command(first_url: str, second_url: str, token: str, second_token: str | None) -> None:
    try:
        with _progress_bars() as progress:
            found = compare(
                first_url,
                second_url,
                auth=Auth(token=token),
                second_auth=Auth(token=second_token or token),
                progress=progress,
            )
    except Unreadable as error:
        first = error.side == "first"
        given = Given(
            url="FIRST_URL" if first else "SECOND_URL",
            token="--token" if first or second_token is None else "--second-token",
            not_found=None,
        )
        raise _Failed(explain_failure(error.error, error.url, given).message) from None
    except MigrationError as error:
        raise _Failed(str(error)) from None
    real = [difference for difference in found if not difference.informational]
    for difference in found:
        click.echo(str(difference))
    click.echo(f"{len(real)} differences, {len(found) - len(real)} informational", err=True)
    if real:
        raise click.exceptions.Exit(DIFFERENT)


class _Failed(click.ClickException):
    """A comparison that could not be made: said as every error is, with its own exit status."""

    exit_code = FAILED
