"""The Linux driver, reading the machine the tests run on (and a made-up sysfs for what it lacks)."""

from __future__ import annotations

import os
import uuid

from berth.tracker.configuration.config import TrackerConfig, parse_cpu_set
from berth.tracker.drivers.linux import LinuxDriver


def _meminfo_total_mb():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    raise AssertionError("no MemTotal")


def test_cpus_memory_and_disk_of_this_machine(tmp_path):
    driver = LinuxDriver(str(tmp_path / "instances"))
    facts = driver.host_facts()
    assert len(facts.cpus) == os.cpu_count()
    with open("/sys/devices/system/cpu/online") as f:
        assert facts.cpus == parse_cpu_set(f.read().strip())
    assert facts.memory_mb == _meminfo_total_mb()
    stat = os.statvfs(tmp_path)  # instances dir missing: its parent's fs
    assert facts.disk_gb == stat.f_blocks * stat.f_frsize // 2**30
    assert facts.disk_gb > 0


def test_numa_cells_of_this_machine_cover_every_cpu_once(tmp_path):
    facts = LinuxDriver(str(tmp_path)).host_facts()
    nodes = (
        sorted(int(n[4:]) for n in os.listdir("/sys/devices/system/node") if n[4:].isdigit() and n.startswith("node"))
        if os.path.isdir("/sys/devices/system/node")
        else [0]
    )
    assert [c.id for c in facts.cells] == nodes
    all_cpus = [cpu for cell in facts.cells for cpu in cell.cpus]
    assert sorted(all_cpus) == sorted(facts.cpus)
    assert all(cell.memory_mb > 0 for cell in facts.cells)


def test_pci_devices_of_this_machine(tmp_path):
    facts = LinuxDriver(str(tmp_path)).host_facts()
    root = "/sys/bus/pci/devices"
    listed = sorted(os.listdir(root)) if os.path.isdir(root) else []
    assert [d.address for d in facts.pci_devices] == listed
    for device in facts.pci_devices:
        with open(f"{root}/{device.address}/vendor") as f:
            assert int(f.read(), 16) == int(device.vendor_id, 16)
        with open(f"{root}/{device.address}/device") as f:
            assert int(f.read(), 16) == int(device.product_id, 16)


def test_tree_of_this_machine(tmp_path):
    driver = LinuxDriver(str(tmp_path))
    facts = driver.host_facts()
    spec = []
    if facts.pci_devices:
        sample = facts.pci_devices[0]
        spec = [{"vendor_id": sample.vendor_id, "product_id": sample.product_id}]
    config = TrackerConfig.from_dict({"reserved": {"MEMORY_MB": 256}, "pci_device_spec": spec})
    tree = driver.provider_tree("this-host", config)
    assert tree.root.inventories["VCPU"].total == os.cpu_count()
    assert tree.root.inventories["MEMORY_MB"].total == _meminfo_total_mb()
    assert tree.root.inventories["MEMORY_MB"].reserved == 256
    assert len(tree.cells) == len(facts.cells)
    if spec:
        same = [
            d
            for d in facts.pci_devices
            if (d.vendor_id, d.product_id) == (sample.vendor_id, sample.product_id) and not d.is_vf
        ]
        assert len(tree.pci_providers) == len(same)
        rc = f"CUSTOM_PCI_{sample.vendor_id.upper()}_{sample.product_id.upper()}"
        assert {n.pci.resource_class for n in tree.pci_providers} == {rc}


def test_guests_are_uuid_named_folders_of_the_instances_path(tmp_path):
    instances = tmp_path / "instances"
    driver = LinuxDriver(str(instances))
    assert driver.guests() == {}
    one = str(uuid.uuid4())
    (instances / one).mkdir(parents=True)
    (instances / "_base").mkdir()
    assert set(driver.guests()) == {one}
    assert driver.disk_path() == instances.resolve()


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_two_node_host_with_sriov_from_a_made_up_sysfs(tmp_path):
    sysfs, procfs = tmp_path / "sys", tmp_path / "proc"
    _write(procfs / "meminfo", "MemTotal:       65536000 kB\nMemFree: 1 kB\n")
    _write(sysfs / "devices/system/cpu/online", "0-7\n")
    for node, cpus, kb in ((0, "0-3", 32768000), (1, "4-7", 32768000)):
        _write(sysfs / f"devices/system/node/node{node}/cpulist", cpus + "\n")
        _write(sysfs / f"devices/system/node/node{node}/meminfo", f"Node {node} MemTotal:  {kb} kB\n")
    devices = sysfs / "bus/pci/devices"

    def device(address, vendor, product, numa, physfn=None, vfs=()):
        d = devices / address
        _write(d / "vendor", f"0x{vendor}\n")
        _write(d / "device", f"0x{product}\n")
        _write(d / "class", "0x020000\n")
        _write(d / "numa_node", f"{numa}\n")
        if physfn:
            os.symlink(f"../{physfn}", d / "physfn")
        for i, vf in enumerate(vfs):
            os.symlink(f"../{vf}", d / f"virtfn{i}")

    device("0000:3b:00.0", "8086", "1572", 1, vfs=("0000:3b:02.0", "0000:3b:02.1"))
    device("0000:3b:02.0", "8086", "154c", 1, physfn="0000:3b:00.0")
    device("0000:3b:02.1", "8086", "154c", 1, physfn="0000:3b:00.0")
    device("0000:af:00.0", "10de", "1eb8", -1)

    driver = LinuxDriver(str(tmp_path / "instances"), sysfs=str(sysfs), procfs=str(procfs))
    facts = driver.host_facts()
    assert facts.memory_mb == 64000 and len(facts.cpus) == 8
    assert [(c.id, sorted(c.cpus), c.memory_mb) for c in facts.cells] == [
        (0, [0, 1, 2, 3], 32000),
        (1, [4, 5, 6, 7], 32000),
    ]
    pf = next(d for d in facts.pci_devices if d.address == "0000:3b:00.0")
    assert pf.vfs == ("0000:3b:02.0", "0000:3b:02.1") and pf.numa_node == 1
    assert next(d for d in facts.pci_devices if d.address == "0000:af:00.0").numa_node is None

    config = TrackerConfig.from_dict(
        {"pci_device_spec": [{"vendor_id": "8086", "product_id": "1572"}, {"vendor_id": "10de"}]}
    )
    tree = driver.provider_tree("big", config)
    nic = tree.get("big_0000:3b:00.0")
    assert (nic.parent, nic.inventories["SRIOV_NET_VF"].total) == ("big_NUMA1", 2)
    assert nic.pci.slots == ("0000:3b:02.0", "0000:3b:02.1")
    gpu = tree.get("big_0000:af:00.0")
    assert (gpu.parent, list(gpu.inventories)) == ("big", ["CUSTOM_PCI_10DE_1EB8"])
