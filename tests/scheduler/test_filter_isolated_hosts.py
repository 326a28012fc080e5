"""IsolatedHostsFilter: isolated images on isolated hosts, as Nova's two result matrices say."""

from __future__ import annotations

import pytest
from hosthelpers import make_filter, make_host, request
from schedulerhelpers import spec

from berth.scheduler.filters.isolated_hosts import IsolatedHostsFilter

ISOLATION = {"isolated_hosts": frozenset({"iso"}), "isolated_images": frozenset({"img-iso"})}


@pytest.mark.parametrize(
    ("restrict", "host", "image", "passes"),
    [
        (True, "iso", "img-iso", True),
        (True, "iso", "img-other", False),
        (True, "iso", None, False),
        (True, "plain", "img-iso", False),
        (True, "plain", "img-other", True),
        (False, "iso", "img-iso", True),
        (False, "iso", "img-other", True),
        (False, "plain", "img-iso", False),
        (False, "plain", "img-other", True),
    ],
)
def test_the_matrix(restrict, host, image, passes):
    check = make_filter(IsolatedHostsFilter, restrict_isolated_hosts_to_isolated_images=restrict, **ISOLATION)
    assert check.host_passes(make_host(host), request(spec(image_id=image))) is passes


def test_the_reasons():
    check = make_filter(IsolatedHostsFilter, **ISOLATION)
    assert check.refusal(make_host("iso"), request(spec(image_id="img-other"))) == (
        "an isolated host, and the image is not one of the isolated images"
    )
    assert check.refusal(make_host("plain"), request(spec(image_id="img-iso"))) == (
        "not an isolated host, and the image is one of the isolated images"
    )


@pytest.mark.parametrize(("restrict", "passes"), [(True, False), (False, True)])
def test_isolated_hosts_without_isolated_images(restrict, passes):
    check = make_filter(
        IsolatedHostsFilter, isolated_hosts=frozenset({"iso"}), restrict_isolated_hosts_to_isolated_images=restrict
    )
    assert check.host_passes(make_host("iso"), request(spec(image_id="any"))) is passes
    assert check.host_passes(make_host("plain"), request(spec(image_id="any")))


def test_nothing_configured_nothing_filtered():
    assert not make_filter(IsolatedHostsFilter).applies(request(spec()))
