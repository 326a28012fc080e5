"""Microversion negotiation through the ``OpenStack-API-Version: placement X.Y`` header."""

from __future__ import annotations

import re
from functools import lru_cache, total_ordering

from berth.domain.errors import BerthError

SERVICE_TYPE = "placement"
HEADER = "OpenStack-API-Version"
MIN_VERSION = (1, 0)
MAX_VERSION = (1, 39)

_VERSION_RE = re.compile(r"^(\d+)\.(\d+)$")


@total_ordering
class Version:
    __slots__ = ("major", "minor")

    def __init__(self, major: int, minor: int):
        self.major = major
        self.minor = minor

    def as_tuple(self):
        return (self.major, self.minor)

    def __eq__(self, other):
        return self.as_tuple() == _tuple(other)

    def __lt__(self, other):
        return self.as_tuple() < _tuple(other)

    def __hash__(self):
        return hash(self.as_tuple())

    def __str__(self):
        return f"{self.major}.{self.minor}"

    __repr__ = __str__

    def at_least(self, minor: int) -> bool:
        """True when this request speaks microversion 1.<minor> or later."""
        return self.major > 1 or (self.major == 1 and self.minor >= minor)


def _tuple(value):
    return value.as_tuple() if isinstance(value, Version) else tuple(value)


MIN = Version(*MIN_VERSION)
MAX = Version(*MAX_VERSION)


class VersionNotAcceptable(BerthError):
    status = 406


@lru_cache(maxsize=256)  # clients send a handful of distinct headers; errors are not cached
def parse(header_value: str | None) -> Version:
    """The microversion a request asked for; 1.0 when it names none.

    A syntactically wrong value is a 400 and a well-formed but unsupported one a 406, as the
    reference answers, so that a client can read the supported range from the 406 body and retry.
    """
    if not header_value:
        return MIN
    requested = None
    for part in header_value.split(","):
        words = part.strip().split()
        if len(words) == 2 and words[0].lower() == SERVICE_TYPE:
            requested = words[1]
    if requested is None:
        return MIN
    if requested.lower() == "latest":
        return MAX
    match = _VERSION_RE.match(requested)
    if not match:
        raise BerthError(f"Invalid microversion: invalid version string: {requested}", status=400)
    version = Version(int(match.group(1)), int(match.group(2)))
    if not (MIN <= version <= MAX):
        raise VersionNotAcceptable(f"Invalid microversion: Unacceptable version header: {requested}")
    return version
