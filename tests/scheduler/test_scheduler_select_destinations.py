"""select_destinations against a real ``berth serve`` with three fake-driver agents: the host chosen
is one whose agent's claim then succeeds, server groups are kept, and a request that fits nowhere
says which filter (or which condition of the query) removed the hosts."""

from __future__ import annotations

import contextlib
import uuid

import pytest
from agenthelpers import started_agents
from httphelpers import RecordingHttp
from trackerhelpers import TOPOLOGY

from berth.clients.errors import ClientError
from berth.clients.http import Answer, JsonHttp
from berth.clients.placement import PlacementClient
from berth.domain.host.request import InstanceSpec
from berth.scheduler.explain import NoValidHost
from berth.scheduler.request.flavor import Flavor, SchedulerConfig, parse_pci_aliases
from berth.scheduler.request.request_spec import build_request_spec
from berth.scheduler.request.server_group import ServerGroup
from berth.scheduler.selector import Selector
from berth.scheduler.service import Service
from berth.scheduler.settings import SelectionSettings

pytestmark = pytest.mark.slow

SMALL = {"cells": [{"cpus": 4, "memory_mb": 8192}], "disk_gb": 100}
CONFIG = SchedulerConfig(
    pci_aliases=parse_pci_aliases(
        [
            '{"name": "gpu", "vendor_id": "10de", "product_id": "1eb8", "numa_policy": "required"}',
            '{"name": "vf", "resource_class": "SRIOV_NET_VF", "numa_policy": "required"}',
        ]
    )
)
PLAIN = Flavor("m1.small", vcpus=1, memory_mb=512, root_gb=1)


@pytest.fixture(scope="module")
def cloud(placement_service, tmp_path_factory):
    """``numa``: two cells, CPUs 2-3 and 6-7 pinned, a GPU on each cell and four virtual functions on
    cell 1 (TOPOLOGY); ``small-a`` and ``small-b``: one cell, no pinned CPUs, no devices."""
    hosts = {
        "numa": {"topology": TOPOLOGY, "config": {"cpu_dedicated_set": "2-3,6-7"}},
        "small-a": {"topology": SMALL},
        "small-b": {"topology": SMALL},
    }
    with started_agents(placement_service.url, tmp_path_factory, hosts) as agents:
        yield agents


@pytest.fixture
def placement(placement_service):
    return PlacementClient(placement_service.url)


@pytest.fixture
def instances(cloud, placement):
    """Instance uuids for a test; whatever they hold on the agents and in Placement is freed after."""
    made: list[str] = []

    def make(count: int) -> list[str]:
        new = [str(uuid.uuid4()) for _ in range(count)]
        made.extend(new)
        return new

    yield make
    for instance in made:
        for agent in cloud.values():
            with contextlib.suppress(ClientError):
                agent.client.delete_instance(instance)
        Service(placement).release(instance)


def _selector(placement, cloud, **settings):
    return Selector(
        placement,
        config=CONFIG,
        settings=SelectionSettings(**settings),
        agents={name: agent.client for name, agent in cloud.items()},
    )


def _spec(flavor, **kwargs):
    return build_request_spec(flavor, None, project_id="project", user_id="user", config=CONFIG, **kwargs)


def _claim_on_agents(cloud, spec, selections):
    """The conductor's step: each instance claimed on its host's agent; the claims' plans."""
    return [
        cloud[s.host].client.instance_claim(InstanceSpec(s.instance_uuid, spec.host_request, "project", "user"))
        for s in selections
    ]


def test_pinned_cpus_land_where_the_agent_pins_them(placement, cloud, instances):
    spec = _spec(Flavor("pinned", vcpus=2, memory_mb=1024, root_gb=1, extra_specs={"hw:cpu_policy": "dedicated"}))
    uuids = instances(2)
    selections = _selector(placement, cloud).select_destinations(spec, 2, instance_uuids=uuids)
    assert [s.host for s in selections] == ["numa", "numa"]
    claims = _claim_on_agents(cloud, spec, selections)
    pinned = [set(cell.pinned_cpus) for claim in claims for cell in claim.numa]
    assert sorted(map(sorted, pinned)) == [[2, 3], [6, 7]]


def test_a_two_cell_guest_goes_to_the_host_with_two_cells(placement, cloud, instances):
    spec = _spec(Flavor("numa2", vcpus=4, memory_mb=2048, root_gb=1, extra_specs={"hw:numa_nodes": "2"}))
    [selection] = _selector(placement, cloud).select_destinations(spec, 1, instance_uuids=instances(1))
    assert selection.host == "numa"
    [claim] = _claim_on_agents(cloud, spec, [selection])
    assert sorted(cell.host_cell for cell in claim.numa) == [0, 1]
    # The other hosts, with room in Placement but one cell only, are not even alternates.
    assert selection.alternates == ()


def test_a_one_cell_guest_skips_the_host_whose_free_vcpus_are_split_over_two_cells(placement, cloud, instances):
    # The NUMA host has 4 free vCPUs in Placement, 2 on each cell; the small hosts 4 on their one cell.
    spec = _spec(Flavor("numa1", vcpus=4, memory_mb=1024, root_gb=1, extra_specs={"hw:numa_nodes": "1"}))
    selections = _selector(placement, cloud).select_destinations(spec, 2, 0, instance_uuids=instances(2))
    assert sorted(s.host for s in selections) == ["small-a", "small-b"]
    claims = _claim_on_agents(cloud, spec, selections)
    assert [[cell.vcpus for cell in claim.numa] for claim in claims] == [[4], [4]]


def test_a_device_on_the_guests_cell_is_claimed_as_the_agent_claims_it(placement, cloud, instances):
    spec = _spec(
        Flavor(
            "vf",
            vcpus=1,
            memory_mb=1024,
            root_gb=1,
            extra_specs={"hw:numa_nodes": "1", "pci_passthrough:alias": "vf:2"},
        )
    )
    [selection] = _selector(placement, cloud).select_destinations(spec, 1, instance_uuids=instances(1))
    assert selection.host == "numa"
    scheduled = selection.destination.allocation_request.allocations
    [claim] = _claim_on_agents(cloud, spec, [selection])
    assert [cell.host_cell for cell in claim.numa] == [1]
    # The scheduler wrote what the agent's claim then holds: nothing moved when the agent claimed.
    assert placement.consumer(selection.instance_uuid).allocations == scheduled == claim.allocations


def test_a_gpu_flavor_lands_on_the_gpu_host(placement, cloud, instances):
    spec = _spec(Flavor("gpu", vcpus=1, memory_mb=1024, root_gb=1, extra_specs={"pci_passthrough:alias": "gpu:1"}))
    uuids = instances(2)
    selections = _selector(placement, cloud).select_destinations(spec, 2, instance_uuids=uuids)
    assert [s.host for s in selections] == ["numa", "numa"]
    claims = _claim_on_agents(cloud, spec, selections)
    assert len({device.address for claim in claims for device in claim.pci}) == 2


def test_a_flavor_that_fits_no_cell_names_the_filter(placement, cloud, instances):
    # Placement sees 4 free PCPUs on the NUMA host; no cell has 3 of them.
    spec = _spec(Flavor("pinned3", vcpus=3, memory_mb=1024, root_gb=1, extra_specs={"hw:cpu_policy": "dedicated"}))
    with pytest.raises(NoValidHost) as raised:
        _selector(placement, cloud).select_destinations(spec, 1, instance_uuids=instances(1))
    assert raised.value.filter_counts == {"NUMATopologyFilter": 1}
    assert raised.value.candidates == 1
    assert "NUMATopologyFilter removed 1 (numa: NUMA cell 0: 2 free dedicated CPUs, 3 asked" in str(raised.value)


def test_a_flavor_no_host_has_room_for_gives_the_services_count(placement, cloud, instances):
    spec = _spec(Flavor("huge", vcpus=64, memory_mb=1024, root_gb=1))
    with pytest.raises(NoValidHost) as raised:
        _selector(placement, cloud).select_destinations(spec, 1, instance_uuids=instances(1))
    assert raised.value.candidates == 0
    assert raised.value.explain is not None
    assert "excluded by 'has 64 VCPU free'" in str(raised.value)


@pytest.mark.parametrize("use_pick", [True, False], ids=["pick", "placement"])
def test_anti_affinity_spreads_and_refuses_a_fourth_member(placement, cloud, instances, use_pick):
    selector = _selector(placement, cloud, use_pick_extension=use_pick)
    spec = _spec(PLAIN)
    uuids = instances(4)
    group = ServerGroup(str(uuid.uuid4()), "anti-affinity", frozenset(uuids))
    selections = selector.select_destinations(spec, 3, instance_uuids=uuids[:3], server_group=group)
    assert selector.last_path == ("pick" if use_pick else "placement")
    assert sorted(s.host for s in selections) == ["numa", "small-a", "small-b"]
    _claim_on_agents(cloud, spec, selections)

    with pytest.raises(NoValidHost) as raised:
        selector.select_destinations(spec, 1, instance_uuids=uuids[3:], server_group=group)
    assert "anti-affinity" in str(raised.value)
    if not use_pick:
        assert raised.value.filter_counts == {"ServerGroupAntiAffinityFilter": 3}
    assert placement.consumer(uuids[3]).allocations == {}


def test_a_refused_request_releases_the_instances_claimed_before(placement, cloud, instances):
    spec = _spec(PLAIN)
    uuids = instances(4)
    group = ServerGroup(str(uuid.uuid4()), "anti-affinity", frozenset(uuids))
    with pytest.raises(NoValidHost) as raised:
        _selector(placement, cloud, use_pick_extension=False).select_destinations(
            spec, 4, instance_uuids=uuids, server_group=group
        )
    assert f"instance {uuids[3]} (4 of 4)" in str(raised.value)
    assert all(placement.consumer(instance).allocations == {} for instance in uuids)


def test_affinity_keeps_the_members_together(placement, cloud, instances):
    spec = _spec(PLAIN)
    uuids = instances(3)
    group = ServerGroup(str(uuid.uuid4()), "affinity", frozenset(uuids))
    selector = _selector(placement, cloud, use_pick_extension=False)
    selections = selector.select_destinations(spec, 2, instance_uuids=uuids[:2], server_group=group)
    assert len({s.host for s in selections}) == 1
    # A later member joins them, found through the earlier members' allocations.
    [later] = selector.select_destinations(spec, 1, instance_uuids=uuids[2:], server_group=group)
    assert later.host == selections[0].host


def test_alternates_come_with_their_allocation_requests_unclaimed(placement, cloud, instances):
    [selection] = _selector(placement, cloud).select_destinations(_spec(PLAIN), 1, 2, instance_uuids=instances(1))
    hosts = [selection.host] + [a.host for a in selection.alternates]
    assert sorted(hosts) == ["numa", "small-a", "small-b"]
    held = placement.consumer(selection.instance_uuid).allocations
    assert held == selection.destination.allocation_request.allocations
    for alternate in selection.alternates:
        assert set(alternate.allocation_request.allocations) == {alternate.root_provider_uuid}
        assert not set(alternate.allocation_request.allocations) & set(held)


@pytest.mark.parametrize(("count", "sorts"), [(1, 1), (2, 3)])
def test_alternates_are_sorted_again_only_after_several_claims(placement, cloud, instances, monkeypatch, count, sorts):
    """As Nova's scheduler: one instance's alternates follow the order its host was chosen from
    (its claim changed that host alone, which alternates leave out); after several claims the hosts
    are filtered and weighed again."""
    from berth.scheduler import selector as selector_module

    calls = []
    real_sorted = selector_module.sorted_hosts

    def counting(*args, **kwargs):
        calls.append(1)
        return real_sorted(*args, **kwargs)

    monkeypatch.setattr(selector_module, "sorted_hosts", counting)
    selector = _selector(placement, cloud, use_pick_extension=False)
    selections = selector.select_destinations(
        _spec(PLAIN, num_instances=count), count, 1, instance_uuids=instances(count)
    )
    assert len(calls) == sorts
    for selection in selections:
        [alternate] = selection.alternates
        assert alternate.host not in {s.host for s in selections}


def test_a_refused_claim_moves_on_to_the_next_host_and_never_retries_it(placement, cloud, instances, monkeypatch):
    """Another consumer takes the best host's memory between the candidates query and the claim."""
    selector = _selector(placement, cloud, use_pick_extension=False)
    tried = []
    real_claim = Service.claim
    thief = str(uuid.uuid4())

    def claim(service, consumer, request, **kwargs):
        tried.append(request)
        if len(tried) == 1:
            [root] = request.allocations
            free = placement.usages(root)
            total = placement.get_inventories(root)[1]["MEMORY_MB"]["total"]
            body = {
                "allocations": {root: {"resources": {"MEMORY_MB": total - free.get("MEMORY_MB", 0)}}},
                "consumer_generation": None,
                "project_id": "project",
                "user_id": "user",
                "consumer_type": "INSTANCE",
            }
            placement.request("PUT", f"/allocations/{thief}", body)
        return real_claim(service, consumer, request, **kwargs)

    monkeypatch.setattr(Service, "claim", claim)
    try:
        [selection] = selector.select_destinations(_spec(PLAIN), 1, instance_uuids=instances(1))
    finally:
        Service(placement).release(thief)
    assert len(tried) == 2
    assert tried[0].allocations != tried[1].allocations
    assert selection.destination.allocation_request is tried[1]
    assert selection.destination.root_provider_uuid not in tried[0].allocations


@pytest.fixture
def aggregates(placement, cloud):
    """Puts hosts into aggregates for a test, and takes them out after."""
    joined = []

    def join(host, aggregate):
        root = cloud[host].client.host_snapshot().tree.root.synced_uuid
        generation, current = placement.get_aggregates(root)
        placement.set_aggregates(root, generation, current | {aggregate})
        joined.append((root, aggregate))

    yield join
    for root, aggregate in joined:
        generation, current = placement.get_aggregates(root)
        placement.set_aggregates(root, generation, current - {aggregate})


def test_zones_and_aggregate_metadata_are_read_from_placements_aggregates(placement, cloud, instances, aggregates):
    fast, zone = str(uuid.uuid4()), str(uuid.uuid4())
    aggregates("small-a", fast)
    aggregates("small-b", fast)
    aggregates("small-b", zone)
    config = SchedulerConfig(availability_zones={"az1": frozenset({zone})})
    selector = Selector(
        placement, config=config, settings=SelectionSettings(aggregate_metadata={fast: {"ssd": "true"}})
    )
    flavor = Flavor("ssd", 1, 512, 1, extra_specs={"aggregate_instance_extra_specs:ssd": "true"})
    spec = build_request_spec(
        flavor, None, availability_zone="nova", project_id="project", user_id="user", config=config
    )
    [selection] = selector.select_destinations(spec, 1, instance_uuids=instances(1))
    # small-b is in az1, the NUMA host has no ssd aggregate.
    assert selection.host == "small-a"
    assert selector.last_path == "placement"

    slow = Flavor("hdd", 1, 512, 1, extra_specs={"aggregate_instance_extra_specs:ssd": "false"})
    spec = build_request_spec(slow, None, availability_zone="nova", project_id="project", user_id="user", config=config)
    with pytest.raises(NoValidHost) as raised:
        selector.select_destinations(spec, 1, instance_uuids=instances(1))
    assert raised.value.filter_counts == {"AvailabilityZoneFilter": 1, "AggregateInstanceExtraSpecsFilter": 2}
    assert "small-b: in availability zone az1, not nova" in str(raised.value)
    assert "small-a: its aggregates' 'ssd' (true) does not match 'false'" in str(raised.value)


class _PlainPlacement(JsonHttp):
    """Calls that are answered 404 for every ``/berth/`` path, as OpenStack's Placement answers."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.berth_paths: list[str] = []

    def request(self, method, path, body=None, *, params=None):
        if "/berth/" in path:
            self.berth_paths.append(f"{method} {self.base_url}{path}")
            return Answer(404, b'{"errors": [{"status": 404, "title": "Not Found", "detail": "no such route"}]}')
        return super().request(method, path, body, params=params)


def test_the_scheduler_works_on_the_placement_api_alone(placement_service, cloud, instances):
    placement = PlacementClient(placement_service.url)
    session = placement.http = _PlainPlacement(placement.url, placement.headers)
    selector = _selector(placement, cloud)
    spec = _spec(PLAIN)
    selections = selector.select_destinations(spec, 2, instance_uuids=instances(2))
    assert selector.last_path == "placement"
    assert {s.host for s in selections} <= set(cloud)
    _claim_on_agents(cloud, spec, selections)
    # The extension was looked for once and never used.
    assert [path.split("?")[0] for path in session.berth_paths] == [f"GET {placement_service.url}/berth/openapi.json"]

    with pytest.raises(NoValidHost) as raised:
        selector.select_destinations(_spec(Flavor("huge", vcpus=64, memory_mb=512)), 1, instance_uuids=instances(1))
    assert raised.value.explain is None
    assert "Placement found no allocation candidates" in str(raised.value)


def test_host_names_are_read_once_and_then_known(placement, cloud):
    service = Service(placement)
    roots = {service.root_of(p["uuid"]) for p in placement.get("/resource_providers")["resource_providers"]}
    first = service.host_names(roots)
    assert set(first.values()) >= {"numa", "small-a", "small-b"}
    recording = RecordingHttp(placement.url, placement.headers)
    placement.http, kept = recording, placement.http
    try:
        assert service.host_names(roots & set(first)) == {root: first[root] for root in roots & set(first)}
    finally:
        placement.http = kept
    # Every name came from memory: no listing of the compute nodes, no provider read.
    assert recording.sent == []


def test_the_roots_of_hosts_are_read_once_and_an_unknown_name_not_at_every_call(placement, cloud):
    service = Service(placement)
    roots = service.host_roots(["numa", "small-a", "no-such-host"])
    names = service.host_names(roots)
    assert sorted(names.values()) == ["numa", "small-a"]
    recording = RecordingHttp(placement.url, placement.headers)
    placement.http, kept = recording, placement.http
    try:
        # The unknown name was looked for moments ago: it is not looked for again yet.
        assert service.host_roots(["small-a", "no-such-host"]) == [r for r in roots if names[r] == "small-a"]
    finally:
        placement.http = kept
    assert recording.sent == []


def test_an_agent_known_only_after_the_selector_was_made_is_asked_for_its_snapshot(placement, cloud, instances):
    """A conductor's agents are the hosts registered at each look, those that register later too."""
    agents: dict = {}
    selector = Selector(placement, config=CONFIG, settings=SelectionSettings(), agents=agents)
    agents.update({name: agent.client for name, agent in cloud.items()})
    spec = _spec(Flavor("numa2", vcpus=4, memory_mb=2048, root_gb=1, extra_specs={"hw:numa_nodes": "2"}))
    [selection] = selector.select_destinations(spec, 1, instance_uuids=instances(1))
    assert selection.host == "numa"


@pytest.fixture
def recorded(placement_service):
    placement = PlacementClient(placement_service.url)
    session = placement.http = RecordingHttp(placement.url, placement.headers)
    return placement, session


def _leases(placement, instances):
    held = {lease["consumer_uuid"] for lease in placement.get("/berth/leases")["leases"]}
    return held & set(instances)


def test_several_instances_on_the_pick_path_are_one_gang_pick_with_leases(cloud, instances, recorded):
    placement, session = recorded
    selector = _selector(placement, cloud)
    uuids = instances(3)
    group = ServerGroup(str(uuid.uuid4()), "anti-affinity", frozenset(uuids))
    selections = selector.select_destinations(
        _spec(PLAIN), 3, instance_uuids=uuids, server_group=group, lease_seconds=300
    )
    assert selector.last_path == "pick"
    assert [s.instance_uuid for s in selections] == uuids
    assert sorted(s.host for s in selections) == ["numa", "small-a", "small-b"]
    # A gang names no alternates.
    assert all(s.alternates == () for s in selections)
    assert [call for call in session.sent if call[0] == "POST"] == [("POST", "/berth/pick")]
    for selection in selections:
        held = placement.consumer(selection.instance_uuid).allocations
        assert held == selection.destination.allocation_request.allocations
    assert _leases(placement, uuids) == set(uuids)


@pytest.mark.parametrize("use_pick", [True, False], ids=["pick", "placement"])
def test_min_count_keeps_the_instances_that_fit_and_leaves_the_others_out(placement, cloud, instances, use_pick):
    selector = _selector(placement, cloud, use_pick_extension=use_pick)
    uuids = instances(4)
    group = ServerGroup(str(uuid.uuid4()), "anti-affinity", frozenset(uuids))
    selections = selector.select_destinations(
        _spec(PLAIN), 4, instance_uuids=uuids, server_group=group, min_count=3, lease_seconds=300
    )
    assert selector.last_path == ("pick" if use_pick else "placement")
    assert [s.instance_uuid for s in selections] == uuids[:3]
    assert sorted(s.host for s in selections) == ["numa", "small-a", "small-b"]
    assert placement.consumer(uuids[3]).allocations == {}
    assert _leases(placement, uuids) == set(uuids[:3])


@pytest.mark.parametrize("use_pick", [True, False], ids=["pick", "placement"])
def test_below_min_count_nothing_is_left_claimed_or_leased(placement, cloud, instances, use_pick):
    selector = _selector(placement, cloud, use_pick_extension=use_pick)
    uuids = instances(4)
    group = ServerGroup(str(uuid.uuid4()), "anti-affinity", frozenset(uuids))
    with pytest.raises(NoValidHost) as raised:
        selector.select_destinations(
            _spec(PLAIN), 4, instance_uuids=uuids, server_group=group, min_count=4, lease_seconds=300
        )
    assert "anti-affinity" in str(raised.value)
    assert all(placement.consumer(instance).allocations == {} for instance in uuids)
    assert _leases(placement, uuids) == set()


def test_with_a_host_down_the_pick_is_still_used_and_never_lands_there(cloud, instances, recorded):
    placement, session = recorded
    down = {"small-a"}
    selector = Selector(
        placement,
        config=SchedulerConfig(pci_aliases=CONFIG.pci_aliases, hosts_down=down),
        agents={name: agent.client for name, agent in cloud.items()},
    )
    hosts = set()
    for instance in instances(2):
        (selection,) = selector.select_destinations(_spec(PLAIN), 1, instance_uuids=[instance])
        assert selector.last_path == "pick"
        hosts.add(selection.host)
        assert all(alternate.host != "small-a" for alternate in selection.alternates)
    assert hosts and "small-a" not in hosts
    # A gang avoids it too: three members anti-affine fit only on the two hosts up.
    uuids = instances(3)
    group = ServerGroup(str(uuid.uuid4()), "anti-affinity", frozenset(uuids))
    placed = selector.select_destinations(_spec(PLAIN), 3, instance_uuids=uuids, server_group=group, min_count=2)
    assert selector.last_path == "pick"
    assert sorted(s.host for s in placed) == ["numa", "small-b"]
    sent = [body for method, path, body in session.bodies if method == "POST" and path == "/berth/pick"]
    roots = {str(p["uuid"]) for p in placement.get("/resource_providers?name=small-a")["resource_providers"]}
    assert sent and all(set(body["avoid_trees"]) == roots for body in sent)


@pytest.mark.parametrize("use_pick", [True, False], ids=["pick", "placement"])
def test_ignored_hosts_are_neither_chosen_nor_alternates(placement, cloud, instances, use_pick):
    """``ignore_hosts`` (a live migration's source), as Nova's scheduler takes it: three instances
    anti-affine fit on the three hosts, and only on the two not ignored once one is."""
    selector = _selector(placement, cloud, use_pick_extension=use_pick)
    (selection,) = selector.select_destinations(_spec(PLAIN), 1, 2, instance_uuids=instances(1), ignore_hosts=["numa"])
    assert selector.last_path == ("pick" if use_pick else "placement")
    assert sorted([selection.host] + [a.host for a in selection.alternates]) == ["small-a", "small-b"]
    uuids = instances(3)
    group = ServerGroup(str(uuid.uuid4()), "anti-affinity", frozenset(uuids))
    placed = selector.select_destinations(
        _spec(PLAIN), 3, instance_uuids=uuids, server_group=group, min_count=2, ignore_hosts=["small-b"]
    )
    assert sorted(s.host for s in placed) == ["numa", "small-a"]


def test_a_failed_read_of_the_hosts_roots_does_not_hold_off_the_next_one(placement, cloud):
    service = Service(PlacementClient("http://127.0.0.1:9", attempts=1))
    with pytest.raises(ClientError):
        service.host_roots(["numa", "small-a"])
    # The service answers again at once: the next call reads, rather than naming no root for a while.
    service.placement = placement
    roots = service.host_roots(["numa", "small-a"])
    assert sorted(service.host_names(roots).values()) == ["numa", "small-a"]
