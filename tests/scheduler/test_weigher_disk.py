"""DiskWeigher: free disk of the tree, and of the shared storage a host's candidates use."""

from __future__ import annotations

from hosthelpers import make_hosts
from weigherhelpers import ranked

from berth.scheduler.weighers.disk import DiskWeigher


def test_free_disk_spreads():
    hosts = make_hosts({"a": {"resources": {"DISK_GB": (100, 90)}}, "b": {"resources": {"DISK_GB": (100, 0)}}})
    assert ranked(hosts, [DiskWeigher()]) == [("b", 1.0), ("a", 0.0)]


def test_shared_storage_counts_as_the_hosts_own():
    hosts = make_hosts(
        {
            "local": {"resources": {"DISK_GB": (500, 0)}},
            "diskless": {"resources": {"VCPU": (8, 0)}, "shared_disk": ("nfs", 1200, 200)},
        }
    )
    assert [host.name for host in hosts] == ["local", "diskless"]  # the pool is nobody's host
    assert hosts[1].facts().free_disk_gb == 1000
    assert ranked(hosts, [DiskWeigher()]) == [("diskless", 1.0), ("local", 0.0)]


def test_a_pool_shared_by_two_hosts_is_one_book():
    shared, cpus = ("nfs", 100, 0), {"VCPU": (8, 0)}
    hosts = make_hosts(
        {
            "a": {"resources": cpus, "shared_disk": shared, "ask": {"VCPU": 1, "DISK_GB": 30}},
            "b": {"resources": cpus, "shared_disk": shared},
        }
    )
    hosts[0].consume(hosts[0].requests[0], "i1", None, member=False)
    assert hosts[1].facts().free_disk_gb == 70
