"""The microversion table is the one list of versions: consecutive, the source of the highest, and
naming every version a route starts at."""

from __future__ import annotations

import pytest

from berth.api import microversion as mv
from berth.api.microversion import Version
from berth.api.routing.routes import ROUTES


def test_the_table_holds_every_version_from_1_0_up_once_and_in_order():
    assert tuple(Version(1, minor) for minor in range(len(mv.ALL))) == mv.ALL
    assert Version(1, 0) == mv.MIN and mv.MAX == mv.ALL[-1] == Version(1, 39)
    assert all(what.strip() for what in mv.CHANGES.values())


def test_the_named_versions_are_the_lines_of_the_table():
    named = {name: value for name, value in vars(mv).items() if isinstance(value, Version) and name.isupper()}
    assert named["CONSUMER_GENERATION"] == Version(1, 28)
    assert named["ANY_OF_TRAITS"] == Version(1, 39)
    assert set(named.values()) <= set(mv.CHANGES)
    # Every line of the table has its name.
    assert set(mv.CHANGES) <= set(named.values())


def test_every_route_starts_at_a_version_of_the_table():
    for methods in ROUTES.values():
        for route in methods.values():
            assert route.min_version in mv.CHANGES


def test_a_line_out_of_order_is_refused():
    with pytest.raises(ValueError, match="out of order"):
        mv._added(len(mv.ALL) + 1, "a version that skips one")


@pytest.mark.parametrize(
    "header,expected",
    [(None, Version(1, 0)), ("placement latest", mv.MAX), ("placement 1.28", mv.CONSUMER_GENERATION)],
)
def test_negotiation_answers_versions_of_the_table(header, expected):
    version = mv.parse(header)
    assert version == expected and str(version) == f"{expected.major}.{expected.minor}"
