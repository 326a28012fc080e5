"""Parsers of the query-string mini-languages: resources, member_of and required.

Each refuses a malformed value with the reference's message, and checks in the reference's order.
"""

from __future__ import annotations

from collections.abc import Sequence

from berth.api.validation import is_uuid, normalize_uuid
from berth.domain.candidate_query import AggregateQuery, TraitQuery
from berth.domain.errors import BadRequest

_RESOURCES_FORM = (
    "Badly formed resources parameter. Expected resources query string parameter in form: "
    "?resources=VCPU:2,MEMORY_MB:1024. Got: "
)


# The form a ``required`` value takes, by whether it may forbid traits.
_TRAITS_FORM = {True: "HW_CPU_X86_VMX,!CUSTOM_MAGIC", False: "HW_CPU_X86_VMX,CUSTOM_MAGIC"}


def parse_resources(value: str) -> dict[str, int]:
    """``VCPU:2,MEMORY_MB:1024`` as a mapping of class to amount, in the order given.

    An amount has no upper bound: one larger than any inventory can hold is a request nothing can
    meet, not a malformed one.
    """
    if not value.strip():
        raise BadRequest(f"{_RESOURCES_FORM}empty string.")
    result: dict[str, int] = {}
    for item in value.split(","):
        try:
            name, amount = item.split(":")
        except ValueError:
            raise BadRequest(f"{_RESOURCES_FORM}{item}.") from None
        try:
            number = int(amount)
        except ValueError:
            raise BadRequest(f"Requested resource {name} expected positive integer amount. Got: {amount}.") from None
        if number < 1:
            raise BadRequest(f"Requested resource {name} requires amount >= 1. Got: {number}.")
        result[name] = number
    return result


def parse_member_of(values: Sequence[str], *, allow_forbidden: bool, suffix: str = "") -> AggregateQuery:
    """``member_of`` values: ``UUID``, ``in:UUID,UUID`` (any of them), and from 1.32 the same after
    ``!`` (none of them)."""
    member_of: list[tuple[str, ...]] = []
    forbidden: list[str] = []
    for value in values:
        negated, uuids = _member_of_value(value)
        if not negated:
            member_of.append(uuids)
            continue
        if not allow_forbidden:
            raise BadRequest(f"Forbidden member_of{suffix} parameters are not supported in the specified microversion")
        forbidden.extend(uuids)
    return AggregateQuery(tuple(member_of), tuple(dict.fromkeys(forbidden)))


def _member_of_value(value: str) -> tuple[bool, tuple[str, ...]]:
    """Whether one ``member_of`` value forbids its aggregates, and their uuids."""
    if "," in value and not value.startswith(("in:", "!in:")):
        raise BadRequest(
            "Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' "
            f"keyword using the valid microversion. Got: {value}"
        )
    negated = value.startswith("!")
    body = value[1:] if negated else value
    uuids = body[3:].split(",") if body.startswith("in:") else [body]
    for uuid in uuids:
        if not is_uuid(uuid):
            raise BadRequest(
                f"Invalid query string parameters: Expected 'member_of' parameter to contain valid UUID(s). Got: {uuid}"
            )
    return negated, tuple(dict.fromkeys(normalize_uuid(u) for u in uuids))


def parse_required(values: Sequence[str], *, allow_forbidden: bool, allow_any_of: bool) -> TraitQuery:
    """``required`` values: ``A,B`` (both), from 1.22 ``!C`` (not C) among them, and from 1.39
    ``in:A,B`` (any of them).  The reference names the parameter ``required`` in every refusal,
    whatever its suffix, and for ``root_required`` too."""
    required: list[tuple[str, ...]] = []
    forbidden: list[str] = []
    for value in values:
        if value.startswith("in:"):
            required.append(_any_of_traits(value, allow_any_of))
        else:
            wanted, banned = _all_of_traits(value, allow_forbidden)
            required.extend((name,) for name in wanted)
            forbidden.extend(banned)
    return TraitQuery(tuple(required), tuple(dict.fromkeys(forbidden)))


def _all_of_traits(value: str, allow_forbidden: bool) -> tuple[list[str], list[str]]:
    """The traits an ``A,!B`` value requires, and those it forbids."""
    names = [n.strip() for n in value.split(",")]
    wanted = [n for n in names if not n.startswith("!")]
    # Any number of leading "!" forbid the trait, as in the reference.
    banned = [n.lstrip("!") for n in names if n.startswith("!")]
    if "" in wanted or "" in banned:
        raise BadRequest(
            "Invalid query string parameters: Expected 'required' parameter value of the form: "
            f"{_TRAITS_FORM[allow_forbidden]}. Got an empty trait in: {value}"
        )
    if banned and not allow_forbidden:
        raise BadRequest(
            "Invalid query string parameters: Expected 'required' parameter value of the form: "
            f"{_TRAITS_FORM[False]}. Got: {value}"
        )
    return wanted, banned


def _any_of_traits(value: str, allow_any_of: bool) -> tuple[str, ...]:
    """The names of an ``in:A,B`` value."""
    if not allow_any_of:
        raise BadRequest(
            "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' "
            f"only supported since microversion 1.39. Got: {value}"
        )
    names = [n.strip() for n in value[3:].split(",")]
    if not all(names):
        raise BadRequest(
            "Invalid query string parameters: Expected 'required' parameter value of the form: "
            f"in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: {value}"
        )
    if any(n.startswith("!") for n in names):
        raise BadRequest(
            "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' "
            f"does not support forbidden traits. Got: {value}"
        )
    return tuple(dict.fromkeys(names))
