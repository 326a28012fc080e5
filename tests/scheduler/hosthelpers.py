"""Host states for the filters' and weighers' unit tests, made without a service: a candidates
answer written here, and agents' snapshots made from the fake driver's provider trees."""

from __future__ import annotations

import uuid

from schedulerhelpers import CONFIG
from trackerhelpers import TOPOLOGY

from berth.domain.host.snapshot import HostSnapshot
from berth.domain.host.usage import HostUsage
from berth.scheduler.hosts.books import ProviderBooks
from berth.scheduler.hosts.candidates import Candidates
from berth.scheduler.hosts.host_state import HostState
from berth.scheduler.request.build_request import BuildRequest
from berth.scheduler.settings import SelectionSettings
from berth.tracker.configuration.config import TrackerConfig
from berth.tracker.drivers.fake import FakeDriver

HOST = {"VCPU": (16, 0), "MEMORY_MB": (32768, 0), "DISK_GB": (500, 0)}
ASK = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}


def uuid_of(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, name))


class FixedSnapshots:
    """Snapshots by host name; a host without one has no agent."""

    def __init__(self, snapshots=None):
        self.snapshots = dict(snapshots or {})
        self.asked: list[str] = []

    def snapshot(self, host, root_uuid):
        self.asked.append(host)
        return self.snapshots.get(host, "no agent is known for this host")


def _summary(uuid: str, resources: dict, traits) -> dict:
    return {
        "resources": {rc: {"capacity": c, "used": u} for rc, (c, u) in resources.items()},
        "traits": list(traits),
        "parent_provider_uuid": None,
        "root_provider_uuid": uuid,
    }


def answer(hosts: dict[str, dict]) -> dict:
    """A candidates answer: per host name, its root's ``resources`` (class -> (capacity, used)),
    ``traits`` and ``ask`` (the amounts of its one allocation request); a host with
    ``shared_disk`` (a sharing provider's name, capacity, used) has its disk there."""
    requests, summaries = [], {}
    for name, host in hosts.items():
        root = uuid_of(name)
        summaries[root] = _summary(root, host.get("resources", HOST), host.get("traits", ["COMPUTE_NODE"]))
        ask = dict(host.get("ask", ASK))
        allocations = {root: {"resources": ask}}
        if "shared_disk" in host:
            pool, capacity, used = host["shared_disk"]
            summaries[uuid_of(pool)] = _summary(
                uuid_of(pool), {"DISK_GB": (capacity, used)}, ["MISC_SHARES_VIA_AGGREGATE"]
            )
            allocations[uuid_of(pool)] = {"resources": {"DISK_GB": ask.pop("DISK_GB")}}
        requests.append({"allocations": allocations, "mappings": {"": [root]}})
    return {"allocation_requests": requests, "provider_summaries": summaries}


def make_hosts(hosts: dict[str, dict], snapshots=None) -> list[HostState]:
    """Host states sharing one set of books; a host's ``aggregates``, ``instances`` and group
    ``members`` are given with it."""
    candidates = Candidates.from_dict(answer(hosts))
    books = ProviderBooks(candidates.summaries)
    states = []
    for name, host in hosts.items():
        root = uuid_of(name)
        state = HostState(
            uuid=root,
            name=name,
            requests=list(candidates.by_host()[root]),
            tree=(root,),
            traits=candidates.summaries[root].traits,
            aggregates=frozenset(host.get("aggregates", ())),
            books=books,
            snapshots=snapshots or FixedSnapshots(),
            instances=set(host["instances"]) if "instances" in host else None,
        )
        state.group_members |= set(host.get("members", ()))
        states.append(state)
    return states


def make_host(name="host", snapshots=None, **host) -> HostState:
    return make_hosts({name: host}, snapshots)[0]


def snapshot(name: str, topology=TOPOLOGY, **config) -> HostSnapshot:
    """What the agent of a fake host named ``name`` (root uuid ``uuid_of(name)``) serves, no claim made."""
    settings = TrackerConfig.from_dict(
        {
            "reserved": {"MEMORY_MB": 0},
            "allocation_ratios": {"VCPU": 1.0},
            "pci_device_spec": [{"vendor_id": "10de"}, {"vendor_id": "8086", "product_id": "1572"}],
            **config,
        }
    )
    tree = FakeDriver(topology).provider_tree(name, settings)
    for node in tree:
        node.uuid = uuid_of(node.name)
    return HostSnapshot.take(name, tree, HostUsage(), shared_provider=None, taken_at=0.0)


def request(spec, **kwargs) -> BuildRequest:
    return BuildRequest(spec, **kwargs)


def make_filter(cls, config=CONFIG, **settings):
    return cls(SelectionSettings(**settings), config)
