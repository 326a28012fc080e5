"""The fixtures OpenStack Placement's gabbi files name, built over Berth's HTTP API.

Placement's own fixtures (``placement/tests/functional/fixtures/gabbits.py``) write their providers
through Placement's objects; these write the same providers, inventories, traits, aggregates and
allocations through ``POST /resource_providers``, ``PUT …/inventories``, ``PUT …/traits``,
``PUT …/aggregates`` and ``PUT /allocations/{consumer}``, and set the same environment variables,
which the YAML files read as ``$ENVIRON['…']``.  Each fixture starts from an empty database.

Gabbi makes the fixture objects itself, without arguments: the runner (``test_gabbits.py``) names
the server and the emptying of its database in :data:`TARGET` before it runs a file.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests
from gabbi import fixture

WRITE_VERSION = "placement 1.28"


@dataclass
class Target:
    """The server a file runs against and how its database is emptied."""

    url: str
    empty_database: Callable[[], None]


TARGET: Target | None = None


def _new_uuid() -> str:
    return str(uuid.uuid4())


class Books:
    """Writes through the API as an admin, each answer checked."""

    def __init__(self, url: str):
        self.url = url
        self.session = requests.Session()
        self.session.headers.update({"X-Auth-Token": "admin", "Accept": "application/json"})

    def call(self, method: str, path: str, body: Any = None, version: str = WRITE_VERSION) -> Any:
        answer = self.session.request(
            method, self.url + path, json=body, headers={"OpenStack-API-Version": version}, timeout=30
        )
        if answer.status_code >= 400:
            raise AssertionError(f"{method} {path} {body!r}: {answer.status_code} {answer.text}")
        return answer.json() if answer.content else None

    def generation(self, rp: str) -> int:
        return int(self.call("GET", f"/resource_providers/{rp}")["generation"])

    def create_provider(self, name: str, *aggregates: str, parent: str | None = None, rp: str | None = None) -> str:
        rp = rp or _new_uuid()
        body: dict[str, Any] = {"name": name, "uuid": rp}
        if parent:
            body["parent_provider_uuid"] = parent
        self.call("POST", "/resource_providers", body, version="placement 1.20")
        if aggregates:
            self.set_aggregates(rp, *aggregates)
        return rp

    def set_aggregates(self, rp: str, *aggregates: str) -> None:
        body = {"aggregates": list(aggregates), "resource_provider_generation": self.generation(rp)}
        self.call("PUT", f"/resource_providers/{rp}/aggregates", body, version="placement 1.19")

    def ensure_class(self, name: str) -> None:
        if name.startswith("CUSTOM_"):
            self.call("PUT", f"/resource_classes/{name}", version="placement 1.7")

    def add_inventory(self, rp: str, resource_class: str, total: int, **fields: Any) -> None:
        """As Placement's ``tb.add_inventory``: ``max_unit`` is the total unless given."""
        self.ensure_class(resource_class)
        fields.setdefault("max_unit", total)
        body = {"resource_class": resource_class, "total": total, **fields}
        body["resource_provider_generation"] = self.generation(rp)
        self.call("POST", f"/resource_providers/{rp}/inventories", body)

    def set_traits(self, rp: str, *traits: str) -> None:
        for trait in traits:
            if trait.startswith("CUSTOM_"):
                self.call("PUT", f"/traits/{trait}", version="placement 1.6")
        body = {"traits": list(traits), "resource_provider_generation": self.generation(rp)}
        self.call("PUT", f"/resource_providers/{rp}/traits", body, version="placement 1.6")

    def set_allocation(self, rp: str, consumer: str, used: dict[str, int], project: str, user: str) -> None:
        """Allocations of a new consumer, as Placement's ``tb.set_allocation`` writes them."""
        body = {
            "allocations": {rp: {"resources": used}},
            "project_id": project,
            "user_id": user,
            "consumer_generation": None,
        }
        self.call("PUT", f"/allocations/{consumer}", body)


class APIFixture(fixture.GabbiFixture):
    """An empty database and the environment variables of Placement's ``APIFixture``."""

    def start_fixture(self) -> None:
        assert TARGET is not None, "the runner names the server before a file runs"
        TARGET.empty_database()
        self.books = Books(TARGET.url)
        for name in (
            "RP_UUID",
            "RP_NAME",
            "RP_UUID1",
            "RP_NAME1",
            "RP_UUID2",
            "RP_NAME2",
            "PROJECT_ID",
            "ADMIN_PROJECT_ID",
            "SERVICE_PROJECT_ID",
            "USER_ID",
            "PROJECT_ID_ALT",
            "USER_ID_ALT",
            "INSTANCE_UUID",
            "MIGRATION_UUID",
            "CONSUMER_UUID",
            "PARENT_PROVIDER_UUID",
            "ALT_PARENT_PROVIDER_UUID",
        ):
            os.environ[name] = _new_uuid()
        os.environ["CUSTOM_RES_CLASS"] = "CUSTOM_IRON_NFV"
        os.environ["CUSTOM_RES_CLASS1"] = "CUSTOM_IRON_NFV1"
        os.environ["CUSTOM_RES_CLASS2"] = "CUSTOM_IRON_NFV2"

    def stop_fixture(self) -> None:
        self.books.session.close()


# The policy and CORS fixtures differ from APIFixture only in the server's settings, which the runner
# chooses by the fixture a file names (test_gabbits.SERVER_SETTINGS).
class OpenPolicyFixture(APIFixture):
    pass


class SecureRBACPolicyFixture(APIFixture):
    pass


class LegacyRBACPolicyFixture(APIFixture):
    pass


class CORSFixture(APIFixture):
    pass


class AllocationFixture(APIFixture):
    """One provider (VCPU 10, DISK_GB 2048) and three consumers of two users of one project."""

    def start_fixture(self) -> None:
        super().start_fixture()
        b = self.books
        os.environ["ALT_USER_ID"] = _new_uuid()
        project, user, alt_user = os.environ["PROJECT_ID"], os.environ["USER_ID"], os.environ["ALT_USER_ID"]
        rp = b.create_provider(os.environ["RP_NAME"], rp=os.environ["RP_UUID"])
        b.add_inventory(rp, "DISK_GB", 2048, step_size=10, min_unit=10, max_unit=1000)
        b.add_inventory(rp, "VCPU", 10, max_unit=10)
        os.environ["CONSUMER_0"] = consumer = _new_uuid()
        b.set_allocation(rp, consumer, {"DISK_GB": 1000}, project, user)
        os.environ["CONSUMER_ID"] = consumer = _new_uuid()
        b.set_allocation(rp, consumer, {"VCPU": 6}, project, user)
        os.environ["ALT_CONSUMER_ID"] = consumer = _new_uuid()
        b.set_allocation(rp, consumer, {"DISK_GB": 20, "VCPU": 1}, project, alt_user)
        os.environ["ALT_RP_UUID"] = _new_uuid()
        os.environ["ALT_RP_NAME"] = _new_uuid()


class SharedStorageFixture(APIFixture):
    """Two compute nodes (NUMA nodes with a PF each below them) and two sharing storage providers, in
    one aggregate."""

    def start_fixture(self) -> None:
        super().start_fixture()
        b = self.books
        os.environ["AGG_UUID"] = agg = _new_uuid()
        rps = {name: b.create_provider(name, agg) for name in ("cn1", "cn2", "ss", "ss2")}
        for cn in ("1", "2"):
            for numa in ("1", "2"):
                rps[f"numa{cn}_{numa}"] = b.create_provider(f"numa{cn}_{numa}", parent=rps[f"cn{cn}"])
        for cn in ("1", "2"):
            for numa in ("1", "2"):
                rps[f"pf{cn}_{numa}"] = b.create_provider(f"pf{cn}_{numa}", parent=rps[f"numa{cn}_{numa}"])
        for name, rp in rps.items():
            os.environ[f"{name.upper()}_UUID"] = rp
        for cn in ("cn1", "cn2"):
            b.add_inventory(rps[cn], "VCPU", 24, allocation_ratio=16.0)
            b.add_inventory(rps[cn], "MEMORY_MB", 128 * 1024, allocation_ratio=1.5)
        b.set_traits(rps["cn1"], "HW_CPU_X86_SSE", "HW_CPU_X86_SSE2")
        b.add_inventory(rps["cn2"], "DISK_GB", 2000, reserved=100, allocation_ratio=1.0)
        for shared in ("ss", "ss2"):
            b.add_inventory(rps[shared], "DISK_GB", 2000, reserved=100, allocation_ratio=1.0)
            b.set_traits(rps[shared], "MISC_SHARES_VIA_AGGREGATE")
        for pf in ("pf1_1", "pf1_2", "pf2_1", "pf2_2"):
            b.add_inventory(rps[pf], "SRIOV_NET_VF", 8, allocation_ratio=1.0)


class NUMAAggregateFixture(APIFixture):
    """Two compute nodes without inventory, their CPUs in NUMA nodes, sharing storage by aggregate
    (one NUMA node shares a second storage provider of its own aggregate)."""

    def start_fixture(self) -> None:
        super().start_fixture()
        b = self.books
        agg_a, agg_b, agg_c = _new_uuid(), _new_uuid(), _new_uuid()
        os.environ.update(AGGA_UUID=agg_a, AGGB_UUID=agg_b, AGGC_UUID=agg_c)
        cn1 = b.create_provider("cn1", agg_a)
        cn2 = b.create_provider("cn2", agg_a, agg_b)
        ss1 = b.create_provider("ss1", agg_a)
        ss2 = b.create_provider("ss2", agg_c)
        numas = {
            "NUMA1_1": b.create_provider("numa1_1", agg_c, parent=cn1),
            "NUMA1_2": b.create_provider("numa1_2", parent=cn1),
            "NUMA2_1": b.create_provider("numa2_1", parent=cn2),
            "NUMA2_2": b.create_provider("numa2_2", parent=cn2),
        }
        os.environ.update(CN1_UUID=cn1, CN2_UUID=cn2, SS1_UUID=ss1, SS2_UUID=ss2)
        for name, numa in numas.items():
            os.environ[f"{name}_UUID"] = numa
            b.add_inventory(numa, "VCPU", 24, allocation_ratio=16.0)
        for ss in (ss1, ss2):
            b.add_inventory(ss, "DISK_GB", 2000, reserved=100, allocation_ratio=1.0)
            b.set_traits(ss, "MISC_SHARES_VIA_AGGREGATE")


class NUMANetworkFixture(APIFixture):
    """A compute node whose resources are in NUMA nodes (with devices below them) and network agents,
    sharing disk by aggregate, and a plain compute node with NICs and PFs below it."""

    cn1: str | None = None
    cn2: str | None = None

    def start_fixture(self) -> None:
        super().start_fixture()
        self.make_entities()

    def make_entities(self) -> None:  # noqa: C901 - the fixture's providers one after the other
        b = self.books
        os.environ["AGGA_UUID"] = agg_a = _new_uuid()
        ss1 = b.create_provider("ss1", agg_a)
        b.set_traits(ss1, "MISC_SHARES_VIA_AGGREGATE")
        b.add_inventory(ss1, "DISK_GB", 2000)
        os.environ["SS1_UUID"] = ss1

        cn1 = self.cn1 or b.create_provider("cn1", agg_a)
        b.set_aggregates(cn1, agg_a)
        b.set_traits(cn1, "COMPUTE_VOLUME_MULTI_ATTACH")
        os.environ["CN1_UUID"] = cn1
        numas = []
        for i in (0, 1):
            numa = b.create_provider(f"numa{i}", parent=cn1)
            b.set_traits(numa, "HW_NUMA_ROOT", *(["CUSTOM_FOO"] if i == 1 else []))
            b.add_inventory(numa, "VCPU", 4)
            numas.append(numa)
            os.environ[f"NUMA{i}_UUID"] = numa
        b.add_inventory(numas[0], "MEMORY_MB", 2048, min_unit=512, step_size=256)
        b.add_inventory(numas[1], "MEMORY_MB", 2048, min_unit=256, max_unit=1024)
        user, project = "numafx-user", "numafx-project"
        b.set_allocation(numas[0], _new_uuid(), {"VCPU": 2}, project, user)

        fpga = b.create_provider("fpga0", parent=numas[0])
        b.add_inventory(fpga, "FPGA", 1)
        os.environ["FPGA0_UUID"] = fpga
        pgpu = b.create_provider("pgpu0", parent=numas[0])
        b.add_inventory(pgpu, "VGPU", 8)
        os.environ["PGPU0_UUID"] = pgpu
        for i in (0, 1):
            fpga = b.create_provider(f"fpga1_{i}", parent=numas[1])
            b.add_inventory(fpga, "FPGA", 1)
            os.environ[f"FPGA1_{i}_UUID"] = fpga

        agent = b.create_provider("sriov_agent", parent=cn1)
        b.set_traits(agent, "CUSTOM_VNIC_TYPE_DIRECT")
        os.environ["SRIOV_AGENT_UUID"] = agent
        for i in (1, 2):
            dev = b.create_provider(f"esn{i}", parent=agent)
            b.set_traits(dev, f"CUSTOM_PHYSNET{i}")
            b.add_inventory(dev, "NET_BW_EGR_KILOBIT_PER_SEC", 10000 * i)
            os.environ[f"ESN{i}_UUID"] = dev
        agent = b.create_provider("ovs_agent", parent=cn1)
        b.set_traits(agent, "CUSTOM_VNIC_TYPE_NORMAL")
        os.environ["OVS_AGENT_UUID"] = agent
        dev = b.create_provider("br_int", parent=agent)
        b.set_traits(dev, "CUSTOM_PHYSNET0")
        b.add_inventory(dev, "NET_BW_EGR_KILOBIT_PER_SEC", 1000)
        os.environ["BR_INT_UUID"] = dev

        cn2 = self.cn2 or b.create_provider("cn2")
        b.set_aggregates(cn2, agg_a)
        b.add_inventory(cn2, "VCPU", 8)
        b.set_allocation(cn2, _new_uuid(), {"VCPU": 3}, project, user)
        b.add_inventory(cn2, "MEMORY_MB", 2048, min_unit=1024, step_size=128)
        b.add_inventory(cn2, "DISK_GB", 1000)
        b.set_traits(cn2, "CUSTOM_FOO")
        os.environ["CN2_UUID"] = cn2
        nics = []
        for i in (1, 2, 3):
            nic = b.create_provider(f"nic{i}", parent=cn2)
            b.set_traits(nic, "CUSTOM_HW_NIC_ROOT")
            nics.append(nic)
            os.environ[f"NIC{i}_UUID"] = nic
        # (suffix, NIC, physnet, VFs) of each PF
        pfs = [("1_1", 0, 1, 4), ("1_2", 0, 2, 4)]
        pfs += [(f"2_{i + 1}", 1, (i % 2) + 1, 2) for i in range(4)]
        pfs += [("3_1", 2, 1, 8)]
        for suffix, nic_index, physnet, vfs in pfs:
            pf = b.create_provider(f"pf{suffix}", parent=nics[nic_index])
            b.set_traits(pf, f"CUSTOM_PHYSNET{physnet}")
            b.add_inventory(pf, "CUSTOM_VF", vfs)
            os.environ[f"PF{suffix}_UUID"] = pf


class DeepNUMANetworkFixture(NUMANetworkFixture):
    """NUMANetworkFixture with the compute nodes below parents and a common grandparent."""

    def make_entities(self) -> None:
        b = self.books
        grandparent = b.create_provider("gp1")
        parent1 = b.create_provider("p1", parent=grandparent)
        parent2 = b.create_provider("p2", parent=grandparent)
        self.cn1 = b.create_provider("cn1", parent=parent1)
        self.cn2 = b.create_provider("cn2", parent=parent2)
        super().make_entities()


class NonSharedStorageFixture(APIFixture):
    """Three compute nodes with local VCPU, MEMORY_MB and DISK_GB, and three aggregate uuids."""

    def start_fixture(self) -> None:
        super().start_fixture()
        b = self.books
        os.environ.update(AGGA_UUID=_new_uuid(), AGGB_UUID=_new_uuid(), AGGC_UUID=_new_uuid())
        for i in (1, 2, 3):
            cn = b.create_provider(f"cn{i}")
            os.environ[f"CN{i}_UUID"] = cn
        for i in (1, 2, 3):
            cn = os.environ[f"CN{i}_UUID"]
            b.add_inventory(cn, "VCPU", 24)
            b.add_inventory(cn, "MEMORY_MB", 128 * 1024)
            b.add_inventory(cn, "DISK_GB", 2000)


class GranularFixture(APIFixture):
    """Three compute nodes of different resources and traits, two sharing disk providers and a sharing
    network provider, in aggregates A, B and C."""

    def start_fixture(self) -> None:
        super().start_fixture()
        b = self.books
        b.ensure_class("CUSTOM_NET_MBPS")
        agg_a, agg_b, agg_c = _new_uuid(), _new_uuid(), _new_uuid()
        os.environ.update(AGGA=agg_a, AGGB=agg_b, AGGC=agg_c)

        os.environ["CN_LEFT"] = cn = b.create_provider("cn_left", agg_a)
        for rc, total in (
            ("VCPU", 8),
            ("MEMORY_MB", 4096),
            ("DISK_GB", 500),
            ("VGPU", 8),
            ("SRIOV_NET_VF", 8),
            ("CUSTOM_NET_MBPS", 4000),
        ):
            b.add_inventory(cn, rc, total)
        b.set_traits(cn, "HW_CPU_X86_AVX", "HW_CPU_X86_AVX2", "HW_GPU_API_DXVA", "HW_NIC_DCB_PFC", "CUSTOM_FOO")

        os.environ["CN_MIDDLE"] = cn = b.create_provider("cn_middle", agg_a, agg_b)
        for rc, total in (("VCPU", 8), ("MEMORY_MB", 4096), ("SRIOV_NET_VF", 8), ("CUSTOM_NET_MBPS", 4000)):
            b.add_inventory(cn, rc, total)
        b.set_traits(cn, "HW_CPU_X86_AVX", "HW_CPU_X86_AVX2", "HW_CPU_X86_SSE", "HW_NIC_ACCEL_TLS")

        os.environ["CN_RIGHT"] = cn = b.create_provider("cn_right", agg_b, agg_c)
        b.add_inventory(cn, "VCPU", 8)
        b.add_inventory(cn, "MEMORY_MB", 4096)
        b.add_inventory(cn, "DISK_GB", 500)
        b.add_inventory(cn, "VGPU", 8, max_unit=2)
        b.set_traits(cn, "HW_CPU_X86_MMX", "HW_GPU_API_DXVA", "CUSTOM_DISK_SSD")

        os.environ["SHR_DISK_1"] = shr = b.create_provider("shr_disk_1", agg_a)
        b.add_inventory(shr, "DISK_GB", 1000)
        b.set_traits(shr, "MISC_SHARES_VIA_AGGREGATE", "CUSTOM_DISK_SSD")
        os.environ["SHR_DISK_2"] = shr = b.create_provider("shr_disk_2", agg_a, agg_b)
        b.add_inventory(shr, "DISK_GB", 1000)
        b.set_traits(shr, "MISC_SHARES_VIA_AGGREGATE")
        os.environ["SHR_NET"] = shr = b.create_provider("shr_net", agg_c)
        b.add_inventory(shr, "SRIOV_NET_VF", 16)
        b.add_inventory(shr, "CUSTOM_NET_MBPS", 40000)
        b.set_traits(shr, "MISC_SHARES_VIA_AGGREGATE")


_VNIC_DIRECT = ("CUSTOM_VNIC_TYPE_DIRECT", "CUSTOM_VNIC_TYPE_DIRECT_PHYSICAL", "CUSTOM_VNIC_TYPE_MACVTAP")


class NeutronQoSMultiSegmentFixture(APIFixture):
    """Four compute trees as Neutron reports them with minimum bandwidth and packet rate QoS on
    multi-segment networks: an Open vSwitch agent with bridges and an SR-IOV agent with PFs below
    each compute node, each bridge and PF on a physical network (compute3 on two, with little
    bandwidth)."""

    def start_fixture(self) -> None:
        super().start_fixture()
        b = self.books
        # compute: ([(bridge, physnet, bandwidth)], [(pf, physnet, bandwidth)])
        computes = {
            "compute0": ([("br-ex", "OTHER", 5000)], [("enp129s0f0", "OTHER", 10000)]),
            "compute1": ([("br-ex", "MSN_S1", 5000)], [("enp129s0f0", "MSN_S1", 10000)]),
            "compute2": ([("br-ex", "MSN_S2", 5000)], [("enp129s0f0", "MSN_S2", 10000)]),
            "compute3": (
                [("br-ex", "MSN_S1", 1000), ("br-ex2", "MSN_S2", 1000)],
                [("enp129s0f0", "MSN_S1", 1000), ("enp129s0f1", "MSN_S2", 1000)],
            ),
        }
        sriov_agents: dict[str, str] = {}
        for compute, (bridges, pfs) in computes.items():
            os.environ[compute] = cn = b.create_provider(compute)
            b.add_inventory(cn, "VCPU", 8)
            b.add_inventory(cn, "MEMORY_MB", 4096)
            b.add_inventory(cn, "DISK_GB", 500)

            ovs = b.create_provider(f"{compute}:Open vSwitch agent", parent=cn)
            os.environ[f"{compute}:ovs_agent"] = ovs
            b.add_inventory(ovs, "NET_PACKET_RATE_KILOPACKET_PER_SEC", 1000)
            b.set_traits(ovs, "CUSTOM_VNIC_TYPE_NORMAL")
            for bridge, physnet, bandwidth in bridges:
                rp = b.create_provider(f"{compute}:Open vSwitch agent:{bridge}", parent=ovs)
                os.environ[f"{compute}:{bridge.replace('-', '_')}"] = rp
                b.add_inventory(rp, "NET_BW_EGR_KILOBIT_PER_SEC", bandwidth)
                b.add_inventory(rp, "NET_BW_IGR_KILOBIT_PER_SEC", bandwidth)
                b.set_traits(rp, "CUSTOM_VNIC_TYPE_NORMAL", f"CUSTOM_PHYSNET_{physnet}")

            sriov = b.create_provider(f"{compute}:NIC Switch agent", parent=cn)
            sriov_agents[compute] = sriov
            # Placement's fixture names compute2's agent for compute3 too.
            os.environ[f"{compute}:sriov_agent"] = sriov_agents["compute2" if compute == "compute3" else compute]
            b.set_traits(sriov, *_VNIC_DIRECT)
            for index, (pf_name, physnet, bandwidth) in enumerate(pfs):
                rp = b.create_provider(f"{compute}:NIC Switch agent:{pf_name}", parent=sriov)
                os.environ[f"{compute}:pf{index}"] = rp
                b.add_inventory(rp, "NET_BW_EGR_KILOBIT_PER_SEC", bandwidth)
                b.add_inventory(rp, "NET_BW_IGR_KILOBIT_PER_SEC", bandwidth)
                b.set_traits(rp, *_VNIC_DIRECT, f"CUSTOM_PHYSNET_{physnet}")
