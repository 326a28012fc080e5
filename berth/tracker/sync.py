"""Making the service's copy of a host's provider tree match what the driver reports.

Providers are matched by name (names are unique in Placement).  A missing provider is created with a
uuid derived from its name, so that a host which lost its state comes back with the same uuids; a
provider under the wrong parent is re-parented (microversion 1.37); one the host no longer has is
deleted, leaves first, unless it still holds allocations, in which case it is kept and reported.
Inventories and traits are written with the provider's generation; on a generation conflict the
provider is read again and the write retried.
"""

from __future__ import annotations

import logging
import uuid as uuidlib
from dataclasses import dataclass, field

from berth.tracker.drivers.base import ProviderTree
from berth.tracker.placement_client import (
    INVENTORY_IN_USE,
    PlacementClient,
    PlacementError,
    retry_on_conflict,
)

LOG = logging.getLogger(__name__)
PROVIDER_NAMESPACE = uuidlib.UUID("6f1d0b52-8f0e-4c7e-9a43-2b1f4e0c9d11")
_FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")


def provider_uuid_for(name: str) -> str:
    return str(uuidlib.uuid5(PROVIDER_NAMESPACE, name))


@dataclass
class SyncResult:
    root_uuid: str = ""
    created: list[str] = field(default_factory=list)
    reparented: list[str] = field(default_factory=list)
    inventories_updated: list[str] = field(default_factory=list)
    traits_updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    kept: dict[str, str] = field(default_factory=dict)  # provider name -> why it could not go
    warnings: list[str] = field(default_factory=list)
    leftover_uuids: set[str] = field(default_factory=set)  # kept providers still in the tree

    @property
    def changed(self) -> bool:
        return bool(self.created or self.reparented or self.inventories_updated or self.traits_updated or self.removed)

    def to_dict(self) -> dict:
        return {
            "root_uuid": self.root_uuid,
            "created": self.created,
            "reparented": self.reparented,
            "inventories_updated": self.inventories_updated,
            "traits_updated": self.traits_updated,
            "removed": self.removed,
            "kept": self.kept,
            "warnings": self.warnings,
        }


def same_inventories(current: dict, wanted: dict) -> bool:
    if set(current) != set(wanted):
        return False
    for rc, want in wanted.items():
        have = current[rc]
        for name in _FIELDS:
            if name == "allocation_ratio":
                if abs(float(have.get(name, 1.0)) - float(want[name])) > 1e-6:
                    return False
            elif have.get(name) != want[name]:
                return False
    return True


class TreeSync:
    def __init__(self, client: PlacementClient):
        self.client = client

    def sync(self, tree: ProviderTree) -> SyncResult:
        """Create, update, re-parent and remove providers until the service has ``tree``; fills uuids."""
        result = SyncResult()
        for rc in sorted(tree.resource_classes()):
            self.client.ensure_resource_class(rc)
        for trait in sorted(tree.traits()):
            self.client.ensure_trait(trait)

        existing: dict[str, dict] = {}
        root = self.client.find_provider(tree.root.name)
        if root is not None:
            existing = {p["name"]: p for p in self.client.providers_in_tree(root["root_provider_uuid"])}
            if root["parent_provider_uuid"] is not None:
                # The host's name sits inside someone else's tree: take it out to be a root again.
                self.client.update_provider(root["uuid"], root["name"], None)
                result.reparented.append(root["name"])
                existing = {p["name"]: p for p in self.client.providers_in_tree(root["uuid"])}

        for node in tree:
            parent_uuid = tree.get(node.parent).uuid if node.parent else None
            current = existing.pop(node.name, None)
            created = False
            if current is None:
                # Optimistically create; a name taken elsewhere (an earlier tree, a rename) is adopted.
                current = self._create(node.name, parent_uuid)
                created = current is not None
                if created:
                    result.created.append(node.name)
                else:
                    current = self.client.find_provider(node.name)
            if current["parent_provider_uuid"] != parent_uuid:
                current = self.client.update_provider(current["uuid"], node.name, parent_uuid)
                result.reparented.append(node.name)
            node.uuid = current["uuid"]
            # A provider just created is known to be empty at generation 0: no need to read it first.
            known = (current["generation"], {}, set()) if created else None
            generation = self._sync_inventories(node, result, known)
            if generation is not None:
                result.inventories_updated.append(node.name)
                known = (generation, None, set()) if created else None
            if self._sync_traits(node, known):
                result.traits_updated.append(node.name)
            if node.aggregates:
                self._sync_aggregates(node)
        result.root_uuid = tree.root.uuid

        # What is left in the tree is what the host no longer reports: deepest first.
        depth = {}
        for p in existing.values():
            d, parent = 0, p["parent_provider_uuid"]
            by_uuid = {q["uuid"]: q for q in existing.values()}
            while parent in by_uuid:
                d, parent = d + 1, by_uuid[parent]["parent_provider_uuid"]
            depth[p["uuid"]] = d
        for p in sorted(existing.values(), key=lambda p: -depth[p["uuid"]]):
            try:
                self.client.delete_provider(p["uuid"])
                result.removed.append(p["name"])
            except PlacementError as e:
                if e.status != 409:
                    raise
                result.kept[p["name"]] = e.detail
                result.leftover_uuids.add(p["uuid"])
                LOG.warning("provider %s is gone from the host but kept: %s", p["name"], e.detail)
        return result

    def _create(self, name, parent_uuid) -> dict | None:
        """The new provider, or None when a provider of that name exists already."""
        for uuid in (provider_uuid_for(name), str(uuidlib.uuid4())):
            try:
                return self.client.create_provider(name, uuid, parent_uuid)
            except PlacementError as e:
                if e.status != 409:
                    raise
                if f"name: {name}" in (e.detail or ""):
                    return None
                # The derived uuid belongs to a provider of another name (renamed by hand): use a fresh one.
        raise PlacementError(409, None, f"cannot create provider {name}")

    def _sync_inventories(self, node, result, known=None) -> int | None:
        """The provider's new generation when the inventories were written, None when already right."""
        wanted = {rc: inv.as_placement() for rc, inv in node.inventories.items()}
        first = [known]

        def attempt():
            if first[0] is not None:
                generation, current, _ = first.pop()
                first.append(None)
            else:
                generation, current = self.client.get_inventories(node.uuid)
            if same_inventories(current, wanted):
                return None
            try:
                return self.client.set_inventories(node.uuid, generation, wanted)
            except PlacementError as e:
                if e.code != INVENTORY_IN_USE:
                    raise
            # A class the host no longer has is still allocated: keep it until freed, set the rest.
            # (A smaller total is accepted by the service, which then refuses new allocations.)
            usages = self.client.usages(node.uuid)
            compromise = dict(wanted)
            for rc, inv in current.items():
                used = usages.get(rc, 0)
                if used and rc not in wanted:
                    compromise[rc] = {k: inv[k] for k in _FIELDS if k in inv}
                    result.warnings.append(f"{node.name}: {rc} kept at {inv['total']} while {used} are allocated")
            if same_inventories(current, compromise):
                return None
            return self.client.set_inventories(node.uuid, generation, compromise)

        return retry_on_conflict(attempt, what=f"inventories of {node.name}")

    def _sync_traits(self, node, known=None) -> bool:
        first = [known]

        def attempt():
            if first[0] is not None:
                generation, _, current = first.pop()
                first.append(None)
            else:
                generation, current = self.client.get_traits(node.uuid)
            if current == node.traits:
                return False
            self.client.set_traits(node.uuid, generation, node.traits)
            return True

        return retry_on_conflict(attempt, what=f"traits of {node.name}")

    def _sync_aggregates(self, node) -> None:
        def attempt():
            generation, current = self.client.get_aggregates(node.uuid)
            if node.aggregates <= current:
                return
            # Only add: aggregates set by operators are theirs to keep.
            self.client.set_aggregates(node.uuid, generation, current | node.aggregates)

        retry_on_conflict(attempt, what=f"aggregates of {node.name}")
