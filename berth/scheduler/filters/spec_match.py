"""How a flavor's ``aggregate_instance_extra_specs:<key>`` value is matched against a metadata value.

The value may start with an operator, as in Nova's filters::

    <value>                  the metadata value is exactly this (no operator: plain text)
    = <n>                    the metadata value, as a number, is at least n
    == <n>, != <n>           numerically equal, not equal
    >= <n>, <= <n>           numerically at least, at most
    s== s!= s< s<= s> s>= <text>   text comparisons
    <in> <text>              the metadata value contains the text
    <all-in> <a> <b> ...     the metadata value contains every one
    <or> <a> <or> <b> ...    the metadata value is one of them

A numeric operator on a value that is not a number does not match.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Final


def _numeric(compare: Callable[[float, float], bool]) -> Callable[[str, str], bool]:
    def match(value: str, wanted: str) -> bool:
        try:
            return compare(float(value), float(wanted))
        except ValueError:
            return False

    return match


_OPERATORS: Final[dict[str, Callable[[str, str], bool]]] = {
    "=": _numeric(operator.ge),
    "==": _numeric(operator.eq),
    "!=": _numeric(operator.ne),
    ">=": _numeric(operator.ge),
    "<=": _numeric(operator.le),
    "s==": operator.eq,
    "s!=": operator.ne,
    "s<": operator.lt,
    "s<=": operator.le,
    "s>": operator.gt,
    "s>=": operator.ge,
    "<in>": lambda value, wanted: wanted in value,
}


def matches(value: str | None, requirement: str) -> bool:
    """Whether the metadata ``value`` meets the extra spec's ``requirement``."""
    words = requirement.split()
    op = words[0] if words else None
    if op not in _OPERATORS and op not in ("<or>", "<all-in>"):
        return value == requirement
    if value is None or len(words) < 2:
        return False
    if op == "<or>":
        # "<or> a <or> b": the choices are the words between the operators.
        return value in words[1::2]
    if op == "<all-in>":
        return all(word in value for word in words[1:])
    return _OPERATORS[words[0]](value, words[1])
