"""Moving an existing OpenStack Placement onto Berth, and comparing two Placement endpoints.

    books.py      Books: everything a Placement service holds, as read through its API
    reading.py    read_placement: the books of a running Placement (or Berth), read and cross-checked
    loading.py    load_into_berth: those books written into an empty Berth database in one transaction;
                  check_target: whether it would take them, asked before the long read
    comparing.py  compare: every difference between two endpoints' books, each naming what and where
    errors.py     MigrationError and its kinds

Only the API is read, never the source's database: the source may be any Placement release that
speaks microversion 1.28 or later, and it is left untouched, so going back means pointing the
endpoint back at it (docs/moving-from-placement.md).
"""

from __future__ import annotations

from berth.migration.books import Books, Consumer, Inventory, Progress, Provider
from berth.migration.comparing import Auth, Difference, compare, differences
from berth.migration.errors import MigrationError, NotEmpty, NotPlacement, SourceChanged, TooOld, Unreadable
from berth.migration.loading import LoadCounts, check_target, load_into_berth
from berth.migration.reading import read_placement

__all__ = [
    "Auth",
    "Books",
    "Consumer",
    "Difference",
    "Inventory",
    "LoadCounts",
    "MigrationError",
    "NotEmpty",
    "NotPlacement",
    "Progress",
    "Provider",
    "SourceChanged",
    "TooOld",
    "Unreadable",
    "check_target",
    "compare",
    "differences",
    "load_into_berth",
    "read_placement",
]
