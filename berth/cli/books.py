"""``berth export``, ``berth import`` and ``berth compare``: copies of the books, and moving an existing
OpenStack Placement onto Berth (docs/backup.md, docs/moving-from-placement.md)."""

from __future__ import annotations

import codecs
import dataclasses
import os
import stat
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import IO

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from berth.cli.client.connection import Given, explain_failure
from berth.migration import (
    Auth,
    MigrationError,
    Unreadable,
    check_target,
    compare,
    load_into_berth,
    read_placement,
)
from berth.portability.format import BooksConflict, BooksFileError, TargetNotEmpty, read_header
from berth.portability.importer import NOT_TEXT, import_books
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


@click.command(
    "export",
    help="Write the books of Berth's database to FILE (JSON Lines; - for standard output). FILE is "
    "written whole or not at all: a file of that name is replaced only once the export is complete.",
)
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--database", default=None, metavar="URL", help=_DATABASE_HELP)
def export_command(file: str, database: str | None) -> None:
    from berth.portability.export import ConnectionLost, NoBooks, export_books

    url = database or default_url()
    try:
        with _progress_bars() as progress:
            if file == "-":
                with click.open_file(file, "w", encoding="utf-8") as out:
                    counts = export_books(url, out, progress)
            else:
                with _whole_file(file) as out:
                    counts = export_books(url, out, progress)
    except NoBooks as error:
        raise click.ClickException(f"{error}: check --database (or $BERTH_DATABASE_URL)") from None
    except ConnectionLost as error:
        raise click.ClickException(f"{error}; {_left_by_a_failed_export(file)}") from None
    click.echo(f"exported {_summary(counts) or 'nothing'}", err=True)


def _left_by_a_failed_export(file: str) -> str:
    """What an export that failed midway left at FILE, and what to do: a file is written whole or
    not at all (``_whole_file``), a stream (standard output, a device, a pipe) as far as it went."""
    again = "export again once the database answers"
    if file == "-":
        return f"what was written to standard output is incomplete: discard it, and {again}"
    if os.path.exists(file) and not os.path.isfile(file):
        return f"what was written to {file} is incomplete: discard it, and {again}"
    if os.path.exists(file):
        return f"{file} is as it was before: {again}"
    return f"no file was written: {again}"


# The first bytes of every SQLite database file.
_SQLITE_MAGIC = b"SQLite format 3\x00"


@contextmanager
def _whole_file(path: str) -> Iterator[IO[str]]:
    """A file to write the snapshot to, put in place at ``path`` only once written in full and on
    disk: an export that fails (a full disk, a database gone away, Ctrl-C) leaves no half-written
    snapshot, and the last good backup of that name as it was. A SQLite database there (the very
    one being exported, given as FILE by mistake) is refused: a snapshot written over it would
    destroy it."""
    if os.path.isfile(path):
        with open(path, "rb") as existing:
            if existing.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC:
                raise click.ClickException(
                    f"{path} is a SQLite database, not a snapshot: give FILE another name "
                    "(the database to export is --database)"
                )
    elif os.path.exists(path):
        # A device or a pipe (/dev/stdout, a FIFO read by a compressor): written to as it is.
        try:
            with open(path, "w", encoding="utf-8") as stream:
                yield stream
        except OSError as error:
            raise click.ClickException(f"cannot write {path}: {error.strerror}") from None
        return
    target = os.path.realpath(path)  # a link to where the backups are kept is followed, not replaced
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise click.ClickException(f"no folder {folder} for {path}: create the folder, or give another FILE")
    try:
        replaced: os.stat_result | None = os.stat(target)
    except OSError:
        replaced = None
    # Beside the target, so that the rename is one step on one file system; by this process alone,
    # and created as open() would create FILE itself (the umask applies) unless it replaces a file:
    # then private until it has that file's mode.
    partial = os.path.join(folder, f".{os.path.basename(target)}.{uuid.uuid4().hex[:8]}.partial")
    try:
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if replaced is None else 0o600)
    except OSError as error:
        raise click.ClickException(f"cannot write {path}: {error.strerror}") from None
    try:
        with open(descriptor, "w", encoding="utf-8") as out:
            if replaced is not None:
                # The new backup keeps the old one's mode (one made 0600 stays private), and its owner
                # and group as far as this process may set them, before a byte of the books is written.
                with suppress(OSError):
                    os.fchown(out.fileno(), replaced.st_uid, replaced.st_gid)
                os.fchmod(out.fileno(), stat.S_IMODE(replaced.st_mode))
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, target)
    except OSError as error:
        with suppress(OSError):
            os.unlink(partial)
        before = "the file there before is as it was" if os.path.exists(target) else "no file was written"
        raise click.ClickException(f"cannot write {path}: {error.strerror}; {before}") from None
    except BaseException:
        with suppress(OSError):
            os.unlink(partial)
        raise


# How a move is given its source: an OpenStack Placement, which `berth serve` is no substitute for.
_PLACEMENT = Given(
    url="--from-placement",
    token="--token",
    not_found=None,
    unreachable="check the URL given as --from-placement (scheme, host and port, as `openstack endpoint "
    "list --service placement` shows Placement's endpoint) and that Placement runs there; once it "
    "answers, the reads need an admin's token (--token)",
)


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
                # A target the move would refuse is refused now, not after the whole read.
                check_target(target)
                books = read_placement(placement_url, token=token, progress=progress)
                loaded = load_into_berth(books, target, progress=progress)
                click.echo(f"loaded {_summary(dataclasses.asdict(loaded)) or 'nothing'} from {placement_url}", err=True)
                return
            assert file is not None
            counts = _import_file(target, file, merge, progress)
    except Unreadable as error:
        failure = explain_failure(error.error, error.url, _PLACEMENT)
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
    _check_first_line(file)
    db = Database(target)
    try:
        upgrade(db)
        return import_books(db, file, merge=merge, progress=progress)
    finally:
        db.dispose()


# Room for the header line, which the first read of the file holds (berth export writes about 400 bytes).
_HEADER_ROOM = 8192


def _check_first_line(file: IO[str]) -> None:
    """The file's header, read before the database is opened: a file that is no snapshot (a
    compressed copy, a database file) is refused without a database created or upgraded for it.
    The first bytes are looked at without being taken from the file, which the import reads whole."""
    peek = getattr(getattr(file, "buffer", None), "peek", None)
    if peek is None:
        return
    start = peek(_HEADER_ROOM)[:_HEADER_ROOM]
    if not start:
        raise BooksFileError(1, "the file is empty")
    if start.startswith(_SQLITE_MAGIC):
        raise BooksFileError(
            1,
            "the file is a SQLite database, not a snapshot: to copy its books, export them "
            "(berth export books.jsonl --database sqlite:///FILE) and import that file",
        )
    line, newline, _rest = start.partition(b"\n")
    try:
        # Without its end in what was read, the line may stop within a character.
        text = codecs.getincrementaldecoder("utf-8")().decode(line, final=bool(newline))
    except UnicodeDecodeError:
        raise BooksFileError(1, NOT_TEXT) from None
    if newline:
        read_header(text)
    # Otherwise a header longer than what was read so far: the import says what is wrong.


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
        side = "FIRST_URL" if first else "SECOND_URL"
        given = Given(
            url=side,
            token="--token" if first or second_token is None else "--second-token",
            not_found=None,
            # Either side may be an OpenStack Placement or a Berth service.
            unreachable=f"check {side} (scheme, host and port of a Placement or Berth endpoint) and that the "
            "service runs there",
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
