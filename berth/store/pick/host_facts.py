"""What the weighers read of the trees a pick weighs (``berth.domain.weighing.HostFacts``).

Taken from the providers the candidate search has just loaded, so that weighing costs no further
reads of the trees: a tree's own inventories, and the disk of every sharing provider of another tree
in an aggregate with one of its providers (the anchoring the search itself uses). The number of
instances on each tree is the one thing read here: the consumers with allocations on its providers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Final

from sqlalchemy import Connection

from berth.domain.candidates import ProviderData
from berth.domain.capacity import Inventory
from berth.domain.weighing import HostFacts, host_facts
from berth.store.placement import names
from berth.store.rawsql import fetch

_WEIGHED_CLASSES: Final = ("VCPU", "PCPU", "MEMORY_MB", "DISK_GB")
_INSTANCES = """
SELECT p.root_provider_id, COUNT(DISTINCT a.consumer_id)
FROM allocations a JOIN resource_providers p ON p.id = a.resource_provider_id
WHERE p.root_provider_id IN {ids} GROUP BY p.root_provider_id"""


def host_facts_of(
    conn: Connection,
    roots: Sequence[int],
    providers: Mapping[int, ProviderData],
    sharing_by_aggregate: Mapping[int, Sequence[ProviderData]],
    members: Mapping[int, int],
    count_instances: bool,
) -> list[HostFacts]:
    """The facts of each tree of ``roots``, in that order, from the providers the candidate search
    loaded (``providers``, every member of those trees among them; ``sharing_by_aggregate``, the
    sharing providers by aggregate) and ``members``, the server group's members by root. The
    instances are counted (one statement) only when ``count_instances``."""
    class_names = {rc: name for name, rc in names.resource_class_ids(conn, _WEIGHED_CLASSES).items()}
    wanted = set(roots)
    tree_members: dict[int, list[ProviderData]] = defaultdict(list)
    for provider in providers.values():
        if provider.root_id in wanted:
            tree_members[provider.root_id].append(provider)
    instances: dict[int, int] = (
        {root_id: count for root_id, count in fetch(conn, _INSTANCES, ids=roots)} if count_instances else {}
    )
    return [
        host_facts(
            _counted_inventories(root_id, tree_members[root_id], sharing_by_aggregate, class_names),
            instances=instances.get(root_id, 0),
            group_members=members.get(root_id, 0),
        )
        for root_id in roots
    ]


def _counted_inventories(
    root_id: int,
    own: Sequence[ProviderData],
    sharing_by_aggregate: Mapping[int, Sequence[ProviderData]],
    class_names: Mapping[int, str],
) -> list[tuple[str, Inventory, int]]:
    """The weighed inventories of a tree's providers, and the disk of each sharing provider of
    another tree in an aggregate with one of them."""
    anchored = {
        shared.id: shared
        for provider in own
        for aggregate in provider.aggregates
        for shared in sharing_by_aggregate.get(aggregate, ())
        if shared.root_id != root_id
    }
    counted: list[tuple[str, Inventory, int]] = [
        (class_names[rc], inventory, inventory.used)
        for provider in own
        for rc, inventory in provider.inventories.items()
        if rc in class_names
    ]
    counted += [
        (class_names[rc], inventory, inventory.used)
        for shared in anchored.values()
        for rc, inventory in shared.inventories.items()
        if class_names.get(rc) == "DISK_GB"
    ]
    return counted
