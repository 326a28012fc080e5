"""Snapshots of the books: ``export_books`` writes a database's books as a versioned JSON Lines file
(docs/backup.md), ``import_books`` reads one into a database, all or nothing."""

from __future__ import annotations

from berth.portability.export import ConnectionLost, NoBooks, Progress, export_books
from berth.portability.format import FORMAT, VERSION, BooksConflict, BooksFileError, TargetNotEmpty
from berth.portability.importer import import_books

__all__ = [
    "FORMAT",
    "VERSION",
    "BooksConflict",
    "BooksFileError",
    "ConnectionLost",
    "NoBooks",
    "Progress",
    "TargetNotEmpty",
    "export_books",
    "import_books",
]
