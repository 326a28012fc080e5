"""Parsers of the query-string mini-languages: resources, member_of and required."""

from __future__ import annotations

from collections.abc import Sequence

from berth.api.validation import is_uuid, normalize_uuid
from berth.domain.candidate_query import AggregateQuery, TraitQuery
from berth.domain.capacity import MAX_INT
from berth.domain.errors import BadRequest


def parse_resources(value: str) -> dict[str, int]:
    """``VCPU:2,MEMORY_MB:1024`` as a mapping of class to amount, in the order given."""
    result: dict[str, int] = {}
    for item in value.split(","):
        try:
            name, amount = item.split(":")
        except ValueError:
            got = item if value else "empty string"
            raise BadRequest(
                "Badly formed resources parameter. Expected resources query string parameter in form: "
                f"?resources=VCPU:2,MEMORY_MB:1024. Got: {got}."
            ) from None
        try:
            number = int(amount)
        except ValueError:
            raise BadRequest(f"Requested resource {name} expected positive integer amount. Got: {amount}.") from None
        if number < 1:
            raise BadRequest(f"Requested resource {name} requires amount >= 1. Got: {amount}.")
        if number > MAX_INT:
            raise BadRequest(
                f"Requested resource {name} amount {amount} exceeds the largest amount "
                f"an inventory can hold ({MAX_INT})."
            )
        result[name] = number
    return result


def parse_member_of(values: Sequence[str], *, allow_forbidden: bool) -> AggregateQuery:
    """``member_of`` values: ``UUID``, ``in:UUID,UUID`` (any of them), and from 1.32 the same after
    ``!`` (none of them)."""
    member_of: list[tuple[str, ...]] = []
    forbidden: list[str] = []
    for value in values:
        negated, uuids = _member_of_value(value, allow_forbidden)
        if negated:
            forbidden.extend(uuids)
        else:
            member_of.append(uuids)
    if allow_forbidden:
        for value in values:
            if "!" in value[1:]:
                raise _bad_member_of(value)
    return AggregateQuery(tuple(member_of), tuple(forbidden))


def _member_of_value(value: str, allow_forbidden: bool) -> tuple[bool, tuple[str, ...]]:
    """Whether one ``member_of`` value forbids its aggregates, and their uuids."""
    negated = value.startswith("!")
    if negated and not allow_forbidden:
        raise BadRequest("Forbidden member_of parameters are not supported in the specified microversion")
    body = value[1:] if negated else value
    any_of = body.startswith("in:")
    if any_of:
        body = body[3:]
    uuids = [u.strip() for u in body.split(",")]
    if not any_of and len(uuids) > 1:
        raise BadRequest(
            "Multiple values for 'member_of' must be prefixed with the 'in:' or '!in:' "
            f"keyword using the valid microversion. Got: {value}"
        )
    if not all(is_uuid(u) for u in uuids):
        raise _bad_member_of(value)
    return negated, tuple(normalize_uuid(u) for u in uuids)


def _bad_member_of(value: str) -> BadRequest:
    return BadRequest(
        f"Invalid query string parameters: Expected 'member_of' parameter to contain valid UUID(s). Got: {value}"
    )


def parse_required(
    values: Sequence[str], *, allow_forbidden: bool, allow_any_of: bool, param: str = "required"
) -> TraitQuery:
    """``required`` values: ``A,B`` (both), from 1.22 ``!C`` (not C) among them, and from 1.39
    ``in:A,B`` (any of them)."""
    required: list[tuple[str, ...]] = []
    forbidden: list[str] = []
    for value in values:
        if value.startswith("in:"):
            required.append(_any_of_traits(value, allow_any_of, param))
            continue
        names = [n.strip() for n in value.split(",")]
        if not all(names):
            raise _bad_traits(param, value, allow_forbidden)
        for name in names:
            if name.startswith("!"):
                forbidden.append(_forbidden_trait(name, value, allow_forbidden, param))
            else:
                required.append((name,))
    return TraitQuery(tuple(required), tuple(forbidden))


def _any_of_traits(value: str, allow_any_of: bool, param: str) -> tuple[str, ...]:
    """The names of an ``in:A,B`` value."""
    if not allow_any_of:
        raise BadRequest(
            "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' "
            f"only supported since microversion 1.39. Got: {value}"
        )
    names = [n.strip() for n in value[3:].split(",")]
    if not all(names) or any(n.startswith("!") for n in names):
        raise _bad_traits(param, value)
    return tuple(names)


def _forbidden_trait(name: str, value: str, allow_forbidden: bool, param: str) -> str:
    """The trait a ``!NAME`` of ``value`` forbids."""
    if not allow_forbidden:
        raise _bad_traits(param, value, allow_forbidden)
    if not name[1:]:
        raise _bad_traits(param, value)
    return name[1:]


def _bad_traits(param: str, value: str, allow_forbidden: bool = True) -> BadRequest:
    example = "HW_CPU_X86_VMX,!CUSTOM_MAGIC" if allow_forbidden else "HW_CPU_X86_VMX,CUSTOM_MAGIC"
    return BadRequest(
        f"Invalid query string parameters: Expected '{param}' parameter value of the form: {example}. Got: {value}"
    )
