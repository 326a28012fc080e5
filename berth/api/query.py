"""Parsers of the query-string mini-languages: resources, member_of and required."""

from __future__ import annotations

from dataclasses import dataclass, field

from berth.api.validation import is_uuid, normalize_uuid
from berth.domain.capacity import MAX_INT
from berth.domain.errors import BadRequest


def parse_resources(value: str) -> dict[str, int]:
    """``VCPU:2,MEMORY_MB:1024`` as a mapping of class to amount."""
    result = {}
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


@dataclass
class AggregateFilter:
    """``member_of`` values: each group must be matched by one of its aggregates; none of
    ``forbidden`` may be matched."""

    groups: list[list[str]] = field(default_factory=list)
    forbidden: list[str] = field(default_factory=list)


def parse_member_of(values: list[str], *, allow_forbidden: bool) -> AggregateFilter:
    result = AggregateFilter()
    for value in values:
        if value.startswith("!") and not allow_forbidden:
            raise BadRequest("Forbidden member_of parameters are not supported in the specified microversion")
        forbidden = value.startswith("!")
        body = value[1:] if forbidden else value
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
            raise BadRequest(
                f"Invalid query string parameters: Expected 'member_of' parameter to contain valid "
                f"UUID(s). Got: {value}"
            )
        uuids = [normalize_uuid(u) for u in uuids]
        if forbidden:
            if any_of or len(uuids) == 1:
                result.forbidden.extend(uuids)
        else:
            result.groups.append(uuids)
    if allow_forbidden:
        for value in values:
            if "!" in value[1:]:
                raise BadRequest(
                    "Invalid query string parameters: Expected 'member_of' parameter to contain valid "
                    f"UUID(s). Got: {value}"
                )
    return result


@dataclass
class TraitFilter:
    """``required`` values: every group needs one of its traits (plain names are groups of one);
    ``forbidden`` traits must be absent."""

    groups: list[list[str]] = field(default_factory=list)
    forbidden: list[str] = field(default_factory=list)

    def names(self) -> set[str]:
        return {name for group in self.groups for name in group} | set(self.forbidden)


def parse_required(
    values: list[str], *, allow_forbidden: bool, allow_any_of: bool, param: str = "required"
) -> TraitFilter:
    result = TraitFilter()
    for value in values:
        if value.startswith("in:") and not allow_any_of:
            raise BadRequest(
                "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' "
                f"only supported since microversion 1.39. Got: {value}"
            )
        if allow_any_of and value.startswith("in:"):
            names = [n.strip() for n in value[3:].split(",")]
            if not all(names) or any(n.startswith("!") for n in names):
                raise _bad_traits(param, value)
            result.groups.append(names)
            continue
        names = [n.strip() for n in value.split(",")]
        if not all(names):
            raise _bad_traits(param, value, allow_forbidden)
        for name in names:
            if name.startswith("!"):
                if not allow_forbidden:
                    raise _bad_traits(param, value, allow_forbidden)
                if not name[1:]:
                    raise _bad_traits(param, value)
                result.forbidden.append(name[1:])
            else:
                result.groups.append([name])
    return result


def _bad_traits(param, value, allow_forbidden=True):
    example = "HW_CPU_X86_VMX,!CUSTOM_MAGIC" if allow_forbidden else "HW_CPU_X86_VMX,CUSTOM_MAGIC"
    return BadRequest(
        f"Invalid query string parameters: Expected '{param}' parameter value of the form: {example}. Got: {value}"
    )
