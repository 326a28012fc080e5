"""The snapshot format: JSON Lines, a header, then one record per line in fixed sections.

docs/backup.md describes every record.  A record is a JSON object whose first key, ``kind``, names
its section; the sections come in the order of ``KINDS``, each record referring only to records of
earlier sections (a provider to its parent, which precedes it).  Version 1 is the first; a reader
refuses a version it does not know. Version 2 adds the quotas, the consumers' priorities and the
preemptions; a file of version 1, which has none of them, is read as before.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Final, cast

import orjson

from berth.domain.capacity import MAX_ALLOCATION_RATIO
from berth.store.pick.priorities import MAX_PRIORITY, MIN_PRIORITY

FORMAT: Final = "berth-books"
VERSION: Final = 2
# The versions this code reads: each adds to the one before it.
READABLE_VERSIONS: Final = (1, 2)

# A field's type: str, int, float, a list of str, or one of those or null (the tuple's second item).
_STR, _INT, _FLOAT, _STRS = "string", "integer", "number", "list of strings"
_USUAL_TYPE: Final[dict[str, type]] = {_STR: str, _INT: int, _FLOAT: float, _STRS: list}

# Each kind's fields, in the order they are written, with their types and whether null is allowed.
FIELDS: Final[dict[str, tuple[tuple[str, str, bool], ...]]] = {
    "resource_class": (("name", _STR, False),),
    "trait": (("name", _STR, False),),
    "aggregate": (("uuid", _STR, False),),
    "provider": (
        ("uuid", _STR, False),
        ("name", _STR, False),
        ("generation", _INT, False),
        ("parent", _STR, True),
        ("root", _STR, False),
    ),
    "inventory": (
        ("provider", _STR, False),
        ("resource_class", _STR, False),
        ("total", _INT, False),
        ("reserved", _INT, False),
        ("min_unit", _INT, False),
        ("max_unit", _INT, False),
        ("step_size", _INT, False),
        ("allocation_ratio", _FLOAT, False),
    ),
    "provider_traits": (("provider", _STR, False), ("traits", _STRS, False)),
    "provider_aggregates": (("provider", _STR, False), ("aggregates", _STRS, False)),
    "project": (("external_id", _STR, False),),
    "user": (("external_id", _STR, False),),
    "consumer_type": (("name", _STR, False),),
    "consumer": (
        ("uuid", _STR, False),
        ("project", _STR, False),
        ("user", _STR, False),
        ("consumer_type", _STR, True),
        ("generation", _INT, False),
    ),
    "allocation": (
        ("consumer", _STR, False),
        ("provider", _STR, False),
        ("resource_class", _STR, False),
        ("used", _INT, False),
    ),
    "lease": (
        ("consumer", _STR, False),
        ("expires_at", _STR, False),
        ("created_at", _STR, False),
        ("updated_at", _STR, False),
    ),
    "server_group": (("uuid", _STR, False), ("policy", _STR, False)),
    "server_group_member": (("group", _STR, False), ("consumer", _STR, False), ("placed_on", _STR, True)),
    # A limit of a project (``user`` null) or of one user within it, on a resource class or on
    # ``consumers`` (docs/pick-and-claim.md, "Quotas").
    "quota": (("project", _STR, False), ("user", _STR, True), ("resource", _STR, False), ("limit", _INT, False)),
    "priority": (("consumer", _STR, False), ("priority", _INT, False)),
    "preemption": (
        ("consumer", _STR, False),
        ("project", _STR, False),
        ("priority", _INT, False),
        ("root", _STR, False),
        ("preempted_by", _STR, False),
        ("preempted_at", _STR, False),
    ),
}

# The sections in the order they are written and must be read.
KINDS: Final[tuple[str, ...]] = tuple(FIELDS)
SECTION: Final[dict[str, int]] = {kind: index for index, kind in enumerate(KINDS)}

# What identifies a record of each kind (within its kind): the fields of its key.
KEYS: Final[dict[str, tuple[str, ...]]] = {
    "resource_class": ("name",),
    "trait": ("name",),
    "aggregate": ("uuid",),
    "provider": ("uuid",),
    "inventory": ("provider", "resource_class"),
    "provider_traits": ("provider",),
    "provider_aggregates": ("provider",),
    "project": ("external_id",),
    "user": ("external_id",),
    "consumer_type": ("name",),
    "consumer": ("uuid",),
    "allocation": ("consumer", "provider", "resource_class"),
    "lease": ("consumer",),
    "server_group": ("uuid",),
    "server_group_member": ("group", "consumer"),
    "quota": ("project", "user", "resource"),
    "priority": ("consumer",),
    "preemption": ("consumer", "preempted_by", "preempted_at"),
}

# Largest values the columns hold (BIGINT for amounts, INTEGER for generations).
_BIGINT: Final = 2**63 - 1
_INTEGER: Final = 2**31 - 1
_INTEGER_FIELDS: Final = frozenset({"generation"})
# Whole numbers that may be negative, with their range.
_SIGNED_FIELDS: Final = {"priority": (MIN_PRIORITY, MAX_PRIORITY)}
# Whole numbers that start at 1: an allocation of nothing is one the API refuses to write
# (PUT /allocations takes amounts of 1 or more), and would then serve as an amount of 0; a step
# size of 0 (which no Placement API takes either) would fail every check of an amount against it.
_POSITIVE_FIELDS: Final = frozenset({"used", "step_size"})
# The largest allocation ratio the API takes.
_LARGEST_RATIO: Final = MAX_ALLOCATION_RATIO
_LONGEST: Final = {
    "uuid": 36, "parent": 36, "root": 36, "provider": 36, "consumer": 36, "group": 36, "placed_on": 36,
    "preempted_by": 36,
}  # fmt: skip
_LONGEST_DEFAULT: Final = 255


class BooksFileError(ValueError):
    """The file is not a snapshot this version can read: names the line and what is wrong."""

    def __init__(self, line: int, problem: str):
        super().__init__(f"line {line}: {problem}")
        self.line = line
        self.problem = problem


class BooksConflict(ValueError):
    """The target holds something the snapshot says otherwise about (a merge that cannot be done)."""


class TargetNotEmpty(ValueError):
    """The target database already holds books and no merge was asked for."""


def encode(kind: str, record: Mapping[str, Any]) -> bytes:
    """One line of the file: ``kind`` first, then the fields in their fixed order."""
    line: dict[str, Any] = {"kind": kind}
    for name, _type, _nullable in FIELDS[kind]:
        line[name] = record[name]
    return orjson.dumps(line) + b"\n"


def header(exported_at: datetime.datetime, counts: Mapping[str, int]) -> bytes:
    body = {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": timestamp(exported_at),
        "counts": {kind: counts.get(kind, 0) for kind in KINDS},
    }
    return orjson.dumps(body) + b"\n"


def timestamp(moment: datetime.datetime) -> str:
    """A naive UTC moment as the API writes it: ``2026-01-01T12:00:00.000000Z``."""
    return moment.replace(tzinfo=None).isoformat("T", "microseconds") + "Z"


def parse_timestamp(text: str) -> datetime.datetime:
    if not text.endswith("Z"):
        raise ValueError(f"{text!r} is not a UTC time ending in Z")
    return datetime.datetime.fromisoformat(text[:-1]).replace(tzinfo=None)


def read_header(line_text: str) -> dict[str, int]:
    """The counts the header announces; refuses another format or a version this code cannot read."""
    try:
        body = orjson.loads(line_text)
    except orjson.JSONDecodeError as error:
        raise BooksFileError(1, f"not JSON: {error}") from None
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        raise BooksFileError(1, f'not a snapshot of Berth\'s books (the first line needs "format": "{FORMAT}")')
    version = body.get("version")
    if version not in READABLE_VERSIONS:
        readable = " and ".join(str(known) for known in READABLE_VERSIONS)
        newer = type(version) is int and version > VERSION
        advice = ": a later release of Berth wrote it; import it with that release or a later one" if newer else ""
        raise BooksFileError(1, f"version {version!r} is not one this Berth reads (it reads {readable}){advice}")
    counts = body.get("counts")
    if not isinstance(counts, dict) or set(counts) - set(KINDS):
        raise BooksFileError(1, f"counts must be an object with the kinds {', '.join(KINDS)}")
    if not all(type(n) is int and n >= 0 for n in counts.values()):
        raise BooksFileError(1, "every count must be a whole number")
    return {kind: counts.get(kind, 0) for kind in KINDS}


def decode(line_number: int, line_text: str) -> tuple[str, dict[str, Any]]:
    """A record's kind and fields, each field checked for its type and the column's range."""
    try:
        record = orjson.loads(line_text)
    except orjson.JSONDecodeError as error:
        raise BooksFileError(line_number, f"not JSON: {error}") from None
    kind = record.get("kind") if type(record) is dict else None
    check = _CHECKS.get(kind) if type(kind) is str else None
    if check is None or not check.passes(record):
        _explain(line_number, record)
    del record["kind"]
    return cast(str, kind), record


class _Check:
    """The common case of one kind's records, checked in one pass: every field of its usual type and
    within its column's range.  A record it does not pass is examined by ``_explain``, which finds
    what is wrong, or that it is a rarer right form (a null, a whole allocation ratio)."""

    def __init__(self, kind: str):
        fields = FIELDS[kind]
        self.keys = frozenset(["kind", *(name for name, _t, _n in fields)])
        self.fields: tuple[tuple[str, type, int, int], ...] = tuple(
            (name, _USUAL_TYPE[type_name], *_range(name, type_name)) for name, type_name, _n in fields
        )

    def passes(self, record: dict[str, Any]) -> bool:
        if record.keys() != self.keys:
            return False
        for name, usual, lowest, highest in self.fields:
            value: Any = record[name]
            value_type = type(value)  # compared through a name, which leaves value Any for mypy
            if value_type is not usual:
                return False
            if usual is str:
                if not lowest <= len(value) <= highest:
                    return False
            elif usual is int:
                if not lowest <= value <= highest:
                    return False
            elif usual is float:
                if not 0 < value <= _LARGEST_RATIO:
                    return False
            elif not all(type(item) is str and item for item in value):
                return False
        return True


def _range(name: str, type_name: str) -> tuple[int, int]:
    if type_name == _STR:
        return 1, _LONGEST.get(name, _LONGEST_DEFAULT)
    if name in _SIGNED_FIELDS:
        return _SIGNED_FIELDS[name]
    return 1 if name in _POSITIVE_FIELDS else 0, _INTEGER if name in _INTEGER_FIELDS else _BIGINT


def _explain(line_number: int, record: Any) -> None:
    """Raise what is wrong with a record the quick check did not pass, or return if nothing is."""
    if not isinstance(record, dict):
        raise BooksFileError(line_number, "a record must be a JSON object")
    kind = record.get("kind")
    fields = FIELDS.get(kind) if isinstance(kind, str) else None
    if fields is None:
        raise BooksFileError(line_number, f"unknown kind {kind!r} (known: {', '.join(KINDS)})")
    if record.keys() != {"kind", *(name for name, _t, _n in fields)}:
        expected = ", ".join(name for name, _t, _n in fields)
        raise BooksFileError(line_number, f"{kind} records have exactly the fields kind, {expected}")
    for name, type_name, nullable in fields:
        problem = _field_problem(name, record[name], type_name, nullable)
        if problem:
            raise BooksFileError(line_number, f"{kind} field {name}: {problem}")


def _field_problem(name: str, value: Any, type_name: str, nullable: bool) -> str | None:
    if value is None:
        return None if nullable else "must not be null"
    if type_name == _STR:
        longest = _LONGEST.get(name, _LONGEST_DEFAULT)
        if type(value) is not str or not value or len(value) > longest:
            return f"must be a string of 1 to {longest} characters, not {value!r}"
    elif type_name == _INT:
        lowest, highest = _range(name, type_name)
        if type(value) is not int or not lowest <= value <= highest:
            return f"must be a whole number from {lowest} to {highest}, not {value!r}"
    elif type_name == _FLOAT:
        if type(value) not in (int, float) or not 0 < value <= _LARGEST_RATIO:
            return f"must be a positive number of at most {_LARGEST_RATIO}, not {value!r}"
    elif type(value) is not list or not all(type(item) is str and item for item in value):
        return f"must be a list of strings, not {value!r}"
    return None


_CHECKS: Final = {kind: _Check(kind) for kind in KINDS}
