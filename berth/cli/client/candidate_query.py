"""The query string of ``berth candidates``: its options, granular suffixes and raw additions."""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import parse_qsl, urlencode

import click

# A granular option: --resources1 VCPU:1, --required_gpu=HW_GPU, --member-of2 AGG, --in-tree1 UUID.
GRANULAR = re.compile(r"^--(resources|required|member[-_]of|in[-_]tree)([A-Za-z0-9_-]{1,64})(?:=(.*))?$")
# Placement takes one resources parameter per group: repeated --resources are joined into it.
JOINED = ("resources",)


def build_query(plain: Sequence[tuple[str, str]], extra: Sequence[str], raw: Sequence[str]) -> str:
    """``plain`` pairs of the declared options, the granular options left in ``extra``, then ``raw``."""
    pairs = list(plain) + _granular(extra)
    for text in raw:
        try:
            pairs += parse_qsl(text, keep_blank_values=True, strict_parsing=True)
        except ValueError:
            raise click.BadParameter(
                f"{text!r} is not a query string like 'resources=VCPU:1&limit=5'", param_hint="--query"
            ) from None
    merged: dict[str, list[str]] = {}
    for key, value in pairs:
        merged.setdefault(key, []).append(value)
    ordered: list[tuple[str, str]] = []
    for key, values in merged.items():
        if key.startswith(JOINED) and len(values) > 1:
            ordered.append((key, ",".join(values)))
        else:
            ordered += [(key, value) for value in values]
    return urlencode(ordered)


def _granular(extra: Sequence[str]) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    words = list(extra)
    while words:
        word = words.pop(0)
        match = GRANULAR.match(word)
        if match is None:
            raise click.UsageError(
                f"unexpected {word!r}: the query options are --resources, --required, --member-of and --in-tree "
                "(each with an optional group suffix, as --resources1), --limit, --group-policy and --query"
            )
        name, suffix, value = match.groups()
        if value is None:
            if not words:
                raise click.UsageError(f"{word} needs a value")
            value = words.pop(0)
        pairs.append((name.replace("-", "_") + suffix, value))
    return pairs
