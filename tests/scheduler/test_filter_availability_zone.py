"""AvailabilityZoneFilter: a host is in the zones whose aggregates it is in, else in the default one."""

from __future__ import annotations

import pytest
from hosthelpers import make_filter, make_host, request
from schedulerhelpers import CONFIG, OTHER_AGGREGATE, ZONE_AGGREGATE, spec

from berth.scheduler.filters.availability_zone import AvailabilityZoneFilter


@pytest.mark.parametrize(
    ("zone", "aggregates", "passes"),
    [
        ("nova", [], True),
        ("nova", [OTHER_AGGREGATE], True),
        ("nova", [ZONE_AGGREGATE], False),  # the host is in az1
        ("az9", [], False),  # no host is in a zone nobody configured
    ],
)
def test_the_default_zone_and_unconfigured_zones(zone, aggregates, passes):
    check = make_filter(AvailabilityZoneFilter)
    build = request(spec(availability_zone=zone))
    assert check.applies(build)
    assert check.host_passes(make_host(aggregates=aggregates), build) is passes


def test_the_reason_names_the_hosts_zone():
    check = make_filter(AvailabilityZoneFilter)
    refusal = check.refusal(make_host(aggregates=[ZONE_AGGREGATE]), request(spec(availability_zone="nova")))
    assert refusal == "in availability zone az1, not nova"


def test_another_default_zone_name():
    check = make_filter(AvailabilityZoneFilter, default_availability_zone="main")
    assert check.host_passes(make_host(), request(spec(availability_zone="main")))
    assert not check.host_passes(make_host(), request(spec(availability_zone="nova")))


def test_a_zone_with_aggregates_is_left_to_the_query():
    build = request(spec(availability_zone="az1"))
    assert ("member_of", f"in:{ZONE_AGGREGATE}") in build.spec.candidates_query()
    check = make_filter(AvailabilityZoneFilter)
    assert not check.applies(build)
    assert not check.applies(request(spec()))
    # Were it run, it would agree with the query.
    assert check.host_passes(make_host(aggregates=[ZONE_AGGREGATE]), build)
    assert not check.host_passes(make_host(), build)
    assert CONFIG.availability_zones["az1"] == {ZONE_AGGREGATE}
