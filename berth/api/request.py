"""The request as handlers see it: its query string read the way Placement reads it.

A key given more than once (``?resources=VCPU:1&resources=VCPU:64``) counts for its last value, on
every route and for nearly every parameter taken singly: Placement reads its query through WebOb,
whose lookup by key answers the last value, and checks the query's JSON schema against those same
last values.  Werkzeug's lookup answers the first.  Parameters that may be repeated (``required``
from 1.39, ``member_of`` from 1.24, ``same_subtree``) are read with ``getlist``, which is
unaffected, and so are ``limit`` and ``group_policy`` of ``GET /allocation_candidates``, of which
Placement uses the first value (``berth.api.candidates.candidate_query.FIRST_VALUE_KEYS``).
"""

from __future__ import annotations

from collections.abc import Iterator

from werkzeug.datastructures import ImmutableMultiDict
from werkzeug.exceptions import BadRequestKeyError
from werkzeug.wrappers import Request


class QueryArgs(ImmutableMultiDict[str, str]):
    """The query string's parameters: ``args[key]``, ``args.get(key)``, ``items()``, ``values()``
    and ``to_dict()`` give a repeated key's last value."""

    def __getitem__(self, key: str) -> str:
        values = self.getlist(key)
        if not values:
            raise BadRequestKeyError(key)
        return values[-1]

    def items(self, multi: bool = False) -> Iterator[tuple[str, str]]:  # type: ignore[override]  # as MultiDict's
        for key, values in self.lists():
            if multi:
                for value in values:
                    yield key, value
            else:
                yield key, values[-1]

    def values(self) -> Iterator[str]:  # type: ignore[override]  # as MultiDict's
        for _, values in self.lists():
            yield values[-1]


class PlacementRequest(Request):
    parameter_storage_class = QueryArgs
