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
from typing import Any, Final

from berth.clients.errors import PlacementError
from berth.clients.placement import JSON, PlacementClient, retry_on_conflict
from berth.domain import error_codes
from berth.domain.capacity import INVENTORY_FIELDS
from berth.domain.host.tree import ProviderNode, ProviderTree

LOG = logging.getLogger(__name__)
PROVIDER_NAMESPACE = uuidlib.UUID("6f1d0b52-8f0e-4c7e-9a43-2b1f4e0c9d11")
# Traits of a compute node that the conductors set and the agent keeps as they are.
CONDUCTOR_TRAITS: Final = frozenset({"COMPUTE_STATUS_DISABLED"})
# What a provider just created is known to hold (generation, inventories, traits): no need to read it.
Known = tuple[int, dict[str, JSON], set[str]]


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

    def to_dict(self) -> dict[str, Any]:
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


def same_inventories(current: dict[str, JSON], wanted: dict[str, JSON]) -> bool:
    if set(current) != set(wanted):
        return False
    for rc, want in wanted.items():
        have = current[rc]
        for name in INVENTORY_FIELDS:
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
        self._ensure_names(tree)
        existing = self._existing_providers(tree, result)
        for node in tree:
            self._sync_node(node, tree.parent_uuid(node), existing.pop(node.name, None), result)
        result.root_uuid = tree.root.synced_uuid
        self._remove_gone(existing, result)
        return result

    def _ensure_names(self, tree: ProviderTree) -> None:
        """Custom resource classes and traits exist before anything names them."""
        for rc in sorted(tree.resource_classes()):
            self.client.ensure_resource_class(rc)
        for trait in sorted(tree.traits()):
            self.client.ensure_trait(trait)

    def _existing_providers(self, tree: ProviderTree, result: SyncResult) -> dict[str, JSON]:
        """The service's tree of the host's name, by provider name (empty for a new host)."""
        root = self.client.find_provider(tree.root.name)
        if root is None:
            return {}
        if root["parent_provider_uuid"] is not None:
            # The host's name sits inside someone else's tree: take it out to be a root again.
            self.client.update_provider(root["uuid"], root["name"], None)
            result.reparented.append(root["name"])
            return {p["name"]: p for p in self.client.providers_in_tree(root["uuid"])}
        return {p["name"]: p for p in self.client.providers_in_tree(root["root_provider_uuid"])}

    def _sync_node(self, node: ProviderNode, parent_uuid: str | None, current: JSON | None, result: SyncResult) -> None:
        created = False
        if current is None:
            # Optimistically create; a name taken elsewhere (an earlier tree, a rename) is adopted.
            current = self._create(node.name, parent_uuid)
            created = current is not None
            if current is not None:
                result.created.append(node.name)
            else:
                current = self.client.find_provider(node.name)
                if current is None:
                    raise PlacementError(409, None, f"provider {node.name} exists and cannot be found")
        if current["parent_provider_uuid"] != parent_uuid:
            current = self.client.update_provider(current["uuid"], node.name, parent_uuid)
            result.reparented.append(node.name)
        node.uuid = current["uuid"]
        known: Known | None = (current["generation"], {}, set()) if created else None
        generation = self._sync_inventories(node, result, known)
        if generation is not None:
            result.inventories_updated.append(node.name)
            known = (generation, {}, set()) if created else None
        if self._sync_traits(node, known):
            result.traits_updated.append(node.name)
        if node.aggregates:
            self._sync_aggregates(node)

    def _remove_gone(self, gone: dict[str, JSON], result: SyncResult) -> None:
        """What is left in the tree is what the host no longer reports: deepest first; kept while used."""
        by_uuid = {p["uuid"]: p for p in gone.values()}

        def depth(provider: JSON) -> int:
            d, parent = 0, provider["parent_provider_uuid"]
            while parent in by_uuid:
                d, parent = d + 1, by_uuid[parent]["parent_provider_uuid"]
            return d

        for p in sorted(gone.values(), key=lambda p: -depth(p)):
            try:
                self.client.delete_provider(p["uuid"])
                result.removed.append(p["name"])
            except PlacementError as e:
                if e.status != 409:
                    raise
                result.kept[p["name"]] = e.detail
                result.leftover_uuids.add(p["uuid"])
                LOG.warning("provider %s is gone from the host but kept: %s", p["name"], e.detail)

    def _create(self, name: str, parent_uuid: str | None) -> JSON | None:
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

    def _sync_inventories(self, node: ProviderNode, result: SyncResult, known: Known | None = None) -> int | None:
        """The provider's new generation when the inventories were written, None when already right."""
        uuid = node.synced_uuid
        wanted = {rc: inventory.as_dict() for rc, inventory in node.inventories.items()}
        first = [known]

        def attempt() -> int | None:
            if first[0] is not None:
                generation, current, _ = first[0]
                first[0] = None
            else:
                generation, current = self.client.get_inventories(uuid)
            if same_inventories(current, wanted):
                return None
            try:
                return self.client.set_inventories(uuid, generation, wanted)
            except PlacementError as e:
                if e.code != error_codes.INVENTORY_IN_USE:
                    raise
            # A class the host no longer has is still allocated: keep it until freed, set the rest.
            # (A smaller total is accepted by the service, which then refuses new allocations.)
            usages = self.client.usages(uuid)
            compromise = dict(wanted)
            for rc, inventory in current.items():
                used = usages.get(rc, 0)
                if used and rc not in wanted:
                    compromise[rc] = {k: inventory[k] for k in INVENTORY_FIELDS if k in inventory}
                    result.warnings.append(f"{node.name}: {rc} kept at {inventory['total']} while {used} are allocated")
            if same_inventories(current, compromise):
                return None
            return self.client.set_inventories(uuid, generation, compromise)

        return retry_on_conflict(attempt, what=f"inventories of {node.name}")

    def _sync_traits(self, node: ProviderNode, known: Known | None = None) -> bool:
        uuid = node.synced_uuid
        first = [known]

        def attempt() -> bool:
            if first[0] is not None:
                generation, _, current = first[0]
                first[0] = None
            else:
                generation, current = self.client.get_traits(uuid)
            # The disabled status is the conductors' to set (an operator disabled the host): kept.
            wanted = node.traits | (current & CONDUCTOR_TRAITS)
            if current == wanted:
                return False
            self.client.set_traits(uuid, generation, wanted)
            return True

        return retry_on_conflict(attempt, what=f"traits of {node.name}")

    def _sync_aggregates(self, node: ProviderNode) -> None:
        uuid = node.synced_uuid

        def attempt() -> None:
            generation, current = self.client.get_aggregates(uuid)
            if node.aggregates <= current:
                return
            # Only add: aggregates set by operators are theirs to keep.
            self.client.set_aggregates(uuid, generation, current | node.aggregates)

        retry_on_conflict(attempt, what=f"aggregates of {node.name}")
