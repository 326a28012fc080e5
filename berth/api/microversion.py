"""Microversions: what each one added, and their negotiation through the
``OpenStack-API-Version: placement X.Y`` header.

The table below is the one list of the versions Berth speaks: every version from 1.0 up has a line
saying what it added and a name the handlers, schemas and routes test against
(``call.version >= CONSUMER_GENERATION``).  The highest version served is the table's last line.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Final, NamedTuple

from berth.domain.errors import BerthError

SERVICE_TYPE: Final = "placement"
HEADER: Final = "OpenStack-API-Version"


class Version(NamedTuple):
    """A microversion; compared as the tuple it is, which costs a request nothing."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    def __repr__(self) -> str:
        return str(self)


# What each version added, in order.
CHANGES: dict[Version, str] = {}


def _added(minor: int, what: str) -> Version:
    version = Version(1, minor)
    if version in CHANGES or (CHANGES and max(CHANGES).minor != minor - 1):
        raise ValueError(f"microversion {version} out of order in the table")
    CHANGES[version] = what
    return version


# fmt: off
BASE: Final = _added(0, "resource providers, their inventories, usages and allocations")
PROVIDER_AGGREGATES: Final = _added(1, "GET and PUT /resource_providers/{uuid}/aggregates")
RESOURCE_CLASSES: Final = _added(2, "custom resource classes under /resource_classes")
PROVIDER_LIST_MEMBER_OF: Final = _added(3, "member_of filters GET /resource_providers")
PROVIDER_LIST_RESOURCES: Final = _added(4, "resources filters GET /resource_providers by free capacity")
DELETE_ALL_INVENTORIES: Final = _added(5, "DELETE /resource_providers/{uuid}/inventories")
TRAITS: Final = _added(6, "traits under /traits and /resource_providers/{uuid}/traits")
PUT_RESOURCE_CLASS: Final = _added(7, "PUT /resource_classes/{name} creates a custom class, without a body")
ALLOCATION_OWNER: Final = _added(8, "project_id and user_id required when writing allocations")
PROJECT_USAGES: Final = _added(9, "GET /usages of a project or user")
ALLOCATION_CANDIDATES: Final = _added(10, "GET /allocation_candidates")
ALLOCATIONS_LINK: Final = _added(11, "an allocations link among a provider's links")
ALLOCATIONS_BY_PROVIDER: Final = _added(12, "allocations keyed by provider uuid in bodies and candidates; "
                                            "project and user in GET /allocations/{consumer}")
POST_ALLOCATIONS: Final = _added(13, "POST /allocations: several consumers at once")
NESTED_PROVIDERS: Final = _added(14, "nested providers: parent and root provider uuids, in_tree")
CACHE_HEADERS: Final = _added(15, "cache-control and last-modified headers")
CANDIDATE_LIMIT: Final = _added(16, "limit on GET /allocation_candidates")
CANDIDATE_TRAITS: Final = _added(17, "required on GET /allocation_candidates; traits in provider summaries")
PROVIDER_LIST_TRAITS: Final = _added(18, "required filters GET /resource_providers")
AGGREGATES_GENERATION: Final = _added(19, "the provider generation in aggregates bodies, compared on PUT")
CREATE_PROVIDER_BODY: Final = _added(20, "POST /resource_providers answers with the provider")
CANDIDATE_MEMBER_OF: Final = _added(21, "member_of on GET /allocation_candidates")
FORBIDDEN_TRAITS: Final = _added(22, "forbidden traits (!NAME) in required")
ERROR_CODES: Final = _added(23, "a code in every error body")
MULTIPLE_MEMBER_OF: Final = _added(24, "member_of given several times, each to be met")
REQUEST_GROUPS: Final = _added(25, "numbered request groups and group_policy on GET /allocation_candidates")
RESERVED_EQUALS_TOTAL: Final = _added(26, "an inventory's reserved may equal its total")
SUMMARY_ALL_CLASSES: Final = _added(27, "provider summaries list every class of the provider, not only those asked")
CONSUMER_GENERATION: Final = _added(28, "consumer generations on allocations")
NESTED_CANDIDATES: Final = _added(29, "candidates spread over a tree's providers; parent and root uuids in summaries")
RESHAPER: Final = _added(30, "POST /reshaper")
CANDIDATE_IN_TREE: Final = _added(31, "in_tree, also per request group, on GET /allocation_candidates")
FORBIDDEN_AGGREGATES: Final = _added(32, "forbidden aggregates (!member_of)")
STRING_SUFFIXES: Final = _added(33, "request group suffixes of up to 64 letters, digits, _ and -")
CANDIDATE_MAPPINGS: Final = _added(34, "mappings of request groups to providers in allocation requests and bodies")
ROOT_REQUIRED: Final = _added(35, "root_required on GET /allocation_candidates")
SAME_SUBTREE: Final = _added(36, "same_subtree, and request groups without resources")
REPARENT: Final = _added(37, "a provider's parent may be changed or removed")
CONSUMER_TYPES: Final = _added(38, "consumer types on allocations and usages")
ANY_OF_TRAITS: Final = _added(39, "required=in:A,B (any of) and required given several times")
# fmt: on

MIN: Final = BASE
MAX: Final = max(CHANGES)
# Every version served, lowest first.
ALL: Final = tuple(CHANGES)


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
    # Read as Placement's microversion-parse reads it: the last "placement <version>" entry, the
    # version being everything after the first blank; "latest" only in lower case; each side of the
    # first dot an int() (so "1.-1" is a well-formed version, out of range, and "1.5 x" is malformed).
    requested = None
    for part in reversed(header_value.split(",")):
        words = part.strip().split(None, 1)
        if len(words) == 2 and words[0].lower() == SERVICE_TYPE:
            requested = words[1].strip()
            break
    if requested is None:
        return MIN
    if requested == "latest":
        return MAX
    try:
        numbers = [int(number) for number in requested.split(".", 1)]
    except ValueError as error:
        raise _malformed(requested, str(error)) from None
    if len(numbers) == 1:
        # microversion-parse hands the numbers to its Version(major, minor), whose TypeError it names.
        raise _malformed(requested, "Version.__new__() missing 1 required positional argument: 'minor'")
    version = Version(*numbers)
    if not (MIN <= version <= MAX):
        raise VersionNotAcceptable(f"Invalid microversion: Unacceptable version header: {requested}")
    return version


def _malformed(requested: str, reason: str) -> BerthError:
    """The 400 of a version that is no two numbers, with the reason microversion-parse gives: the
    error of Python's ``int()`` on the first part that is no number."""
    return BerthError(f"Invalid microversion: invalid version string: {requested}; {reason}", status=400)
