"""The guest NUMA topology and memory page size a flavor (or its image) asks for.

``hw:numa_nodes=N`` splits the vCPUs and memory evenly over N guest cells, each on a different host
cell; ``hw:numa_cpus.<cell>`` (guest CPU ids, as ``0-3,^2,5``) and ``hw:numa_mem.<cell>`` (MiB) split
them by hand, for every cell or for none. Pinned CPUs or a page size want a topology too (one cell
unless said otherwise). An image may set the ``hw_numa_*`` properties only where the flavor sets
none. The topology becomes the host request's ``NumaRequest``; Placement sees none of it (the
compute agent's NUMA cells carry no inventory of their own).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final, Literal, TypeAlias

from berth.domain.host.request import NumaRequest
from berth.scheduler.errors import SpecError
from berth.scheduler.request.flavor import Flavor, Image, hw_values

PageSize: TypeAlias = Literal["small", "large", "any"] | int  # an int is a size in KiB
_NAMED_PAGE_SIZES: Final[tuple[Literal["small", "large", "any"], ...]] = ("small", "large", "any")
_PAGE_SIZE: Final = re.compile(r"^(\d+)(?:([KMGT])i?B)?$")
_UNIT_KIB: Final = {None: 1, "K": 1, "M": 1024, "G": 1024**2, "T": 1024**3}


def parse_cpu_set(text: str, key: str) -> set[int]:
    """``"0-3,^2,5"`` -> {0, 1, 3, 5}."""
    include: set[int] = set()
    exclude: set[int] = set()
    for raw in text.split(","):
        part = raw.strip()
        if not part:
            continue
        target = exclude if part.startswith("^") else include
        bounds = part.lstrip("^").split("-", 1)
        try:
            first, last = int(bounds[0]), int(bounds[-1])
        except ValueError:
            raise SpecError(key, f"{part!r} is not a CPU number or range") from None
        if first < 0 or first > last:
            raise SpecError(key, f"{part!r} is not a CPU range")
        target.update(range(first, last + 1))
    return include - exclude


def numa_request(
    flavor: Flavor, image: Image, *, dedicated: bool, page_size: PageSize | None, overrides: Mapping[str, str]
) -> NumaRequest | None:
    """The guest topology, or None when nothing asks for one. ``overrides`` names the extra specs
    that changed the flavor's vCPUs or memory, which a topology cannot divide."""
    nodes_key, nodes = _node_count(flavor, image)
    cpus_by_cell, mem_by_cell, prefix = _cell_maps(flavor, image)
    if nodes is None and not dedicated and page_size is None:
        if cpus_by_cell or mem_by_cell:
            first = next(iter(cpus_by_cell or mem_by_cell))
            raise SpecError(f"{prefix}{'cpus' if cpus_by_cell else 'mem'}.{first}", "needs hw:numa_nodes")
        return None
    if overrides:
        raise SpecError(
            next(iter(overrides.values())),
            "differs from the flavor's own amount, which a NUMA topology divides among its cells",
        )
    cells = nodes or 1
    if not cpus_by_cell and not mem_by_cell:
        if flavor.vcpus % cells or flavor.memory_mb % cells:
            raise SpecError(
                nodes_key, f"{flavor.vcpus} vCPUs and {flavor.memory_mb} MB do not divide evenly into {cells} cells"
            )
        return NumaRequest(cells)
    cell_vcpus = _manual_cpus(flavor, cells, cpus_by_cell, f"{prefix}cpus")
    cell_memory = _manual_memory(flavor, cells, mem_by_cell, f"{prefix}mem")
    return NumaRequest(cells, tuple(cell_vcpus), tuple(cell_memory))


def _node_count(flavor: Flavor, image: Image) -> tuple[str, int | None]:
    flavor_nodes, image_nodes = hw_values(flavor, image, "numa_nodes")
    if flavor_nodes is not None and image_nodes is not None:
        raise SpecError("hw_numa_nodes", "the flavor sets hw:numa_nodes; an image may not change it")
    key, value = ("hw:numa_nodes", flavor_nodes) if flavor_nodes is not None else ("hw_numa_nodes", image_nodes)
    if value is None:
        return key, None
    if not value.strip().isdigit() or int(value) < 1:
        raise SpecError(key, f"{value!r} is not a number of NUMA nodes (1 or more)")
    return key, int(value)


_CELL_KEY: Final = re.compile(r"^(hw:|hw_)numa_(cpus|mem)\.(.*)$")


def _cell_maps(flavor: Flavor, image: Image) -> tuple[dict[int, str], dict[int, str], str]:
    """({cell: cpu set}, {cell: MiB}, the key prefix), from the flavor, or else from the image."""
    found = []
    for prefix, source in (("hw:", flavor.extra_specs), ("hw_", image.properties)):
        cpus: dict[int, str] = {}
        memory: dict[int, str] = {}
        for key, value in source.items():
            match = _CELL_KEY.match(key)
            if match is None or match.group(1) != prefix:
                continue
            if not match.group(3).isdigit():
                raise SpecError(key, "the suffix is a guest NUMA cell number")
            (cpus if match.group(2) == "cpus" else memory)[int(match.group(3))] = value
        found.append((cpus, memory, f"{prefix}numa_"))
    (flavor_cpus, flavor_memory, _), (image_cpus, image_memory, _) = found
    if (flavor_cpus or flavor_memory) and (image_cpus or image_memory):
        raise SpecError("hw_numa_cpus", "the flavor maps its NUMA cells; an image may not change them")
    return found[0] if flavor_cpus or flavor_memory else found[1]


def _check_cells(cells: int, by_cell: Mapping[int, str], key: str) -> None:
    if set(by_cell) != set(range(cells)):
        missing = sorted(set(range(cells)) - set(by_cell))
        extra = sorted(set(by_cell) - set(range(cells)))
        where = f"{key}.{missing[0]} is missing" if missing else f"{key}.{extra[0]} names no cell"
        raise SpecError(key, f"one entry per cell 0-{cells - 1} is needed: {where}")


def _manual_cpus(flavor: Flavor, cells: int, by_cell: Mapping[int, str], key: str) -> list[int]:
    """Each cell's vCPU count; every guest CPU in exactly one cell."""
    _check_cells(cells, by_cell, key)
    seen: set[int] = set()
    counts = []
    for cell in range(cells):
        cell_key = f"{key}.{cell}"
        cpus = parse_cpu_set(by_cell[cell], cell_key)
        if not cpus:
            raise SpecError(cell_key, "a cell needs at least one CPU")
        beyond = sorted(c for c in cpus if c >= flavor.vcpus)
        if beyond:
            raise SpecError(cell_key, f"CPU {beyond[0]} is beyond the flavor's vCPUs 0-{flavor.vcpus - 1}")
        twice = sorted(cpus & seen)
        if twice:
            raise SpecError(cell_key, f"CPU {twice[0]} is in another cell too")
        seen |= cpus
        counts.append(len(cpus))
    unassigned = sorted(set(range(flavor.vcpus)) - seen)
    if unassigned:
        raise SpecError(key, f"vCPUs {','.join(map(str, unassigned))} are in no cell")
    return counts


def _manual_memory(flavor: Flavor, cells: int, by_cell: Mapping[int, str], key: str) -> list[int]:
    _check_cells(cells, by_cell, key)
    sizes = []
    for cell in range(cells):
        value = by_cell[cell]
        if not value.strip().isdigit() or int(value) < 1:
            raise SpecError(f"{key}.{cell}", f"{value!r} is not an amount of memory in MB")
        sizes.append(int(value))
    if sum(sizes) != flavor.memory_mb:
        raise SpecError(key, f"the cells add up to {sum(sizes)} MB, the flavor has {flavor.memory_mb} MB")
    return sizes


def page_size(flavor: Flavor, image: Image) -> PageSize | None:
    """The flavor's page size; an image may choose one only when the flavor says ``any`` or ``large``."""
    flavor_value, image_value = hw_values(flavor, image, "mem_page_size")
    if flavor_value is None:
        if image_value is not None:
            raise SpecError("hw_mem_page_size", "the flavor sets no hw:mem_page_size; an image may not ask for one")
        return None
    size = _parse_page_size(flavor_value, "hw:mem_page_size")
    if image_value is None:
        return size
    if size not in ("any", "large"):
        raise SpecError(
            "hw_mem_page_size", f"the flavor's hw:mem_page_size is {flavor_value!r}; the image cannot change it"
        )
    return _parse_page_size(image_value, "hw_mem_page_size")


def _parse_page_size(value: str, key: str) -> PageSize:
    for name in _NAMED_PAGE_SIZES:
        if value == name:
            return name
    match = _PAGE_SIZE.match(value.strip())
    if match is None or int(match.group(1)) < 1:
        raise SpecError(key, f"{value!r} is not small, large, any or a size (2048, 2MB, 1GB)")
    return int(match.group(1)) * _UNIT_KIB[match.group(2)]
