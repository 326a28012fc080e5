"""Reading a snapshot into a database: all of it in one transaction, or nothing.

Into an empty database (after ``berth.store.migrate.upgrade``) the file's books are written as they
are: uuids, names and generations kept, ids chosen afresh in the file's order (so the API lists
things in the same order as the source did), every provider given a new revision, so that no copy of
a provider's candidate data kept by a running server (berth.store.candidates.provider_cache) is taken for
current, and ``inventories.used`` set from the allocations, as every allocation write keeps it.

A merge (``merge=True``) writes into a database that holds books already: a record the database holds
as it is, is kept; one it holds otherwise is a conflict, and so is a provider (or consumer, or server
group) the two hold with different inventories, traits, aggregates (allocations, members). What is
new is added; an existing provider that receives new allocations has its generation and revision
moved on, as an allocation write would.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from sqlalchemy import Connection

from berth.portability.deferred_checks import put_back, set_aside
from berth.portability.export import Progress
from berth.portability.format import KINDS, SECTION, BooksConflict, BooksFileError, decode, read_header
from berth.portability.loader import Loader
from berth.portability.sink import BATCH
from berth.portability.target import advance_sequences, existing_records, refuse_unless_empty
from berth.store.database import Database
from berth.store.held_books import WRITTEN_TABLES, lock_for_import


def import_books(
    database: str | Database, inp: IO[str], merge: bool = False, progress: Progress | None = None
) -> dict[str, int]:
    """Write the snapshot ``inp`` into ``database``; the records of each kind written (all the file
    holds, or for a merge those the database did not hold already).

    Raises ``TargetNotEmpty`` for a database with books unless ``merge``, ``BooksFileError`` (naming
    the line) for a file it cannot take, ``BooksConflict`` when a merge finds the database holding
    something otherwise; in every such case the database is left as it was.
    """
    db = Database(database) if isinstance(database, str) else database
    try:
        with _write_transaction(db) as conn:
            lock_for_import(conn)
            if merge:
                return _load(conn, inp, existing_records(conn), progress)
            refuse_unless_empty(conn)
            aside = set_aside(conn, WRITTEN_TABLES)
            counts = _load(conn, inp, None, progress)
            put_back(conn, aside)
            return counts
    finally:
        if db is not database:
            db.dispose()


@contextmanager
def _write_transaction(db: Database) -> Iterator[Connection]:
    """One transaction for the whole import (on SQLite holding the write lock from its start)."""
    with db.connect() as conn:
        if db.is_sqlite:
            conn = conn.execution_options(berth_write=True)  # BEGIN IMMEDIATE
        with conn.begin():
            yield conn


def _load(
    conn: Connection, inp: IO[str], existing: dict[Any, dict[str, Any]] | None, progress: Progress | None
) -> dict[str, int]:
    lines = _text_lines(inp)
    first = next(lines, None)
    if first is None:
        raise BooksFileError(1, "the file is empty")
    announced = read_header(first)
    loader = Loader(conn, existing)
    try:
        return _read_records(conn, lines, announced, existing, loader, progress)
    except BaseException as error:
        loader.abort(error)
        raise


def _text_lines(inp: IO[str]) -> Iterator[str]:
    """The file's lines; bytes that are not UTF-8 (a compressed copy, say) are refused by line."""
    lines = iter(inp)
    for number in itertools.count(1):
        try:
            text = next(lines)
        except StopIteration:
            return
        except UnicodeDecodeError:
            # Text is decoded a block at a time: the bytes at fault are in this line or a few after it.
            raise BooksFileError(number, NOT_TEXT) from None
        yield text


NOT_TEXT = (
    "the file is not UTF-8 text from about here: a snapshot is the JSON Lines berth export "
    "wrote (decompress a compressed copy first)"
)


def _read_records(
    conn: Connection,
    lines: Iterator[str],
    announced: dict[str, int],
    existing: dict[Any, dict[str, Any]] | None,
    loader: Loader,
    progress: Progress | None,
) -> dict[str, int]:
    counts = dict.fromkeys(KINDS, 0)
    section = 0
    line_number = 1
    for line_number, text in enumerate(lines, start=2):
        kind, record = decode(line_number, text)
        if SECTION[kind] != section:
            loader.flush()
            section = _next_section(line_number, kind, section, counts, announced, progress)
        loader.add(line_number, kind, record)
        counts[kind] += 1
        if progress and counts[kind] % BATCH == 0:
            progress(kind, counts[kind], announced[kind])
    loader.flush()
    _check_counts(line_number + 1, counts, announced)
    if progress:
        for kind in KINDS[section:]:
            progress(kind, counts[kind], announced[kind])
    if existing is not None:
        missing = loader.unmatched_in_target()
        if missing:
            more = f"; and {len(missing) - 10} more" if len(missing) > 10 else ""
            raise BooksConflict("; ".join(missing[:10]) + more)
    _finish(conn, loader)
    # What was written: for a merge, the records the database did not hold already.
    return counts if existing is None else {kind: loader.added.get(kind, 0) for kind in KINDS}


def _next_section(
    line: int, kind: str, section: int, counts: dict[str, int], announced: dict[str, int], progress: Progress | None
) -> int:
    if SECTION[kind] < section:
        raise BooksFileError(
            line, f"a {kind} record after the {KINDS[section]} records: sections come in the order {', '.join(KINDS)}"
        )
    if progress:
        for passed in KINDS[section : SECTION[kind]]:
            progress(passed, counts[passed], announced[passed])
    return SECTION[kind]


def _check_counts(end: int, counts: dict[str, int], announced: dict[str, int]) -> None:
    """A file cut short (or added to) does not hold what its header announces."""
    for kind in KINDS:
        if counts[kind] != announced[kind]:
            raise BooksFileError(
                end, f"the header announces {announced[kind]} {kind} records, the file has {counts[kind]}"
            )


def _finish(conn: Connection, loader: Loader) -> None:
    loader.finish()
    loader.write_quotas()
    if loader.touched_providers:
        ids = ", ".join(str(i) for i in sorted(loader.touched_providers))
        conn.exec_driver_sql(
            f"UPDATE resource_providers SET generation = generation + 1, revision = revision + 1 WHERE id IN ({ids})"
        )
    advance_sequences(conn)
