"""AggregateInstanceExtraSpecsFilter: the flavor's aggregate_instance_extra_specs against the
metadata of the host's aggregates, with Nova's operators."""

from __future__ import annotations

import pytest
from hosthelpers import make_filter, make_host, request
from schedulerhelpers import OTHER_AGGREGATE, ZONE_AGGREGATE, spec

from berth.scheduler.filters.aggregate_extra_specs import AggregateInstanceExtraSpecsFilter
from berth.scheduler.filters.spec_match import matches

METADATA = {ZONE_AGGREGATE: {"ssd": "true", "cores": "16", "gen": "skylake"}, OTHER_AGGREGATE: {"ssd": "false"}}


@pytest.mark.parametrize(
    ("value", "requirement", "expected"),
    [
        ("true", "true", True),
        ("True", "true", False),
        ("16", "= 8", True),  # "=" is "at least"
        ("4", "= 8", False),
        ("16", "== 16.0", True),
        ("16", "!= 16", False),
        ("16", ">= 17", False),
        ("16", "<= 16", True),
        ("abc", ">= 3", False),  # not a number
        ("skylake", "s== skylake", True),
        ("skylake", "s!= skylake", False),
        ("b", "s< c", True),
        ("b", "s<= a", False),
        ("b", "s> a", True),
        ("b", "s>= c", False),
        ("skylake-sp", "<in> lake", True),
        ("skylake", "<in> cascade", False),
        ("avx avx2 sse", "<all-in> avx2 sse", True),
        ("avx sse", "<all-in> avx2 sse", False),
        ("b", "<or> a <or> b <or> c", True),
        ("d", "<or> a <or> b <or> c", False),
        ("<or>", "<or>", False),
        (None, "<in> x", False),
        (None, "x", False),
    ],
)
def test_operators(value, requirement, expected):
    assert matches(value, requirement) is expected


def test_every_spec_must_match_a_value_of_the_hosts_aggregates():
    check = make_filter(AggregateInstanceExtraSpecsFilter, aggregate_metadata=METADATA)
    build = request(
        spec({"aggregate_instance_extra_specs:ssd": "true", "aggregate_instance_extra_specs:cores": ">= 8"})
    )
    assert check.applies(build)
    assert check.host_passes(make_host(aggregates=[ZONE_AGGREGATE]), build)
    # One of its aggregates says true: enough.
    assert check.host_passes(make_host(aggregates=[ZONE_AGGREGATE, OTHER_AGGREGATE]), build)
    missing = "no aggregate of the host has 'cores' in its metadata"
    assert check.refusal(make_host(aggregates=[OTHER_AGGREGATE]), build) == missing
    assert check.refusal(make_host(aggregates=[]), build) == missing


def test_a_value_that_does_not_match_is_named():
    check = make_filter(AggregateInstanceExtraSpecsFilter, aggregate_metadata=METADATA)
    build = request(spec({"aggregate_instance_extra_specs:ssd": "true"}))
    assert check.refusal(make_host(aggregates=[OTHER_AGGREGATE]), build) == (
        "its aggregates' 'ssd' (false) does not match 'true'"
    )


def test_a_flavor_without_such_specs_is_not_filtered():
    assert not make_filter(AggregateInstanceExtraSpecsFilter, aggregate_metadata=METADATA).applies(request(spec()))
