"""The alternates of the service's pick as the scheduler asks for them and reads them: the body that
``pick_body`` builds, posted to the service in process, and ``alternates_of`` on its answer."""

from __future__ import annotations

import uuid

from hosthelpers import request
from schedulerhelpers import CONFIG, spec

from berth.scheduler.filters import enabled_filters
from berth.scheduler.hosts.candidates import AllocationRequest
from berth.scheduler.picking import MOST_ALTERNATES, alternates_of, pick_body
from berth.scheduler.settings import SelectionSettings
from berth.scheduler.weighers import enabled_weighers

# The spec's flavor: 4 VCPU, 4096 MB, 10 GB.
FLAVOR = {"VCPU": 4, "MEMORY_MB": 4096, "DISK_GB": 10}


def _body(alternates=0):
    settings = SelectionSettings(weighers=("RAMWeigher",))
    return pick_body(
        request(spec()),
        str(uuid.uuid4()),
        enabled_filters(settings, CONFIG),
        enabled_weighers(settings),
        settings,
        alternates=alternates,
    )


def test_the_body_asks_for_alternates_only_when_some_are_wanted():
    assert _body(2)["alternates"] == 2
    assert "alternates" not in _body(0)
    # The service names at most MOST_ALTERNATES and refuses a body asking for more.
    assert _body(MOST_ALTERNATES + 5)["alternates"] == MOST_ALTERNATES


def test_the_services_alternates_are_read_best_first(api):
    hosts = [
        api.create_provider(f"host-{i}", inventory={"VCPU": 16, "MEMORY_MB": 16384 - 2048 * i, "DISK_GB": 100})
        for i in range(4)
    ]
    r = api.post("/berth/pick", _body(2))
    assert r.status_code == 200, r.data
    answer = r.json_body
    assert answer["root_provider_uuid"] == hosts[0]
    assert alternates_of(answer) == [(host, AllocationRequest({host: FLAVOR}, {"": (host,)})) for host in hosts[1:3]]


def test_an_answer_without_alternates_has_none():
    assert alternates_of({"root_provider_uuid": "r", "alternates": []}) == []
    # A service from before alternates.
    assert alternates_of({"root_provider_uuid": "r"}) == []
