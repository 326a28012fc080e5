"""The layer rule of docs/architecture.md, checked on every import under berth/.

Every ``import`` and ``from ... import`` counts, at module level or inside a function, and so does
``importlib.import_module("berth....")`` with a literal name. A module belongs to the layer of the
longest package prefix in ``LAYERS`` that names it; a new package gets a row there, or this test fails.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "berth"


@dataclass(frozen=True)
class Layer:
    name: str
    packages: tuple[str, ...]
    may_import: frozenset[str]


def _layers(*rows: tuple[str, tuple[str, ...], set[str]]) -> dict[str, Layer]:
    return {name: Layer(name, packages, frozenset(allowed | {name})) for name, packages, allowed in rows}


# The store's rooms, each a layer of its own: the core (the database, its schema and migrations,
# plain SQL) under the Placement nouns, and the candidate search, leases, server groups, the pick
# and the dashboard's and probes' reads above them.
_STORE = {
    "store",
    "store.placement",
    "store.candidates",
    "store.leases",
    "store.server_groups",
    "store.pick",
    "store.quotas",
    "store.observability",
}

_EVERY_LAYER = _STORE | {
    "domain",
    "sql",
    "web",
    "api",
    "clients",
    "tracker",
    "scheduler",
    "conductor",
    "conductor.api",
    "migration",
    "portability",
    "testbed",
    "cli",
    "package",
}

# The one table of the rule: each layer, the packages in it, and the layers it may import (it may
# always import itself). Layers still to be written have their row already.
LAYERS = _layers(
    # berth/__init__.py: the package itself, importable by the tools that locate it.
    ("package", ("berth",), set()),
    ("domain", ("berth.domain",), set()),
    # The SQL plumbing the store and the conductors' journal share (statements sent to the driver).
    ("sql", ("berth.sql",), set()),
    ("store", ("berth.store",), {"sql", "domain"}),
    ("store.placement", ("berth.store.placement",), {"store", "domain"}),
    ("store.candidates", ("berth.store.candidates",), {"store.placement", "store", "domain"}),
    ("store.leases", ("berth.store.leases",), {"store.placement", "store", "domain"}),
    ("store.server_groups", ("berth.store.server_groups",), {"store", "domain"}),
    (
        "store.pick",
        ("berth.store.pick",),
        {
            "store.candidates",
            "store.leases",
            "store.server_groups",
            "store.quotas",
            "store.placement",
            "store",
            "domain",
        },
    ),
    ("store.quotas", ("berth.store.quotas",), {"store.placement", "store", "domain"}),
    ("store.observability", ("berth.store.observability",), {"store", "domain"}),
    # The HTTP plumbing both HTTP services share (the Placement service and the conductors' API).
    ("web", ("berth.web",), {"domain"}),
    ("api", ("berth.api",), _STORE | {"web", "domain"}),
    # Snapshots of the books (export and import), written straight to the tables.
    ("portability", ("berth.portability",), _STORE | {"domain"}),
    # HTTP clients of the service and of the agents: what the scheduler and the conductor may use
    # to talk to them.
    ("clients", ("berth.clients",), {"domain"}),
    ("tracker", ("berth.tracker",), {"domain", "clients", "sql"}),
    ("scheduler", ("berth.scheduler",), {"domain", "clients"}),
    ("conductor", ("berth.conductor",), {"scheduler", "domain", "clients", "sql"}),
    # The conductors' HTTP API, over the conductor and the shared plumbing, never the service's layer.
    ("conductor.api", ("berth.conductor.api",), {"conductor", "web", "scheduler", "domain", "clients", "sql"}),
    # Moving an existing Placement onto Berth: reads it through the API, writes Berth's database.
    ("migration", ("berth.migration",), _STORE | {"clients", "domain"}),
    # Load tools (bench, stress, sim) drive a server from outside, and may reuse any part of it.
    ("testbed", ("berth.testbed",), _EVERY_LAYER - {"cli"}),
    ("cli", ("berth.cli",), _EVERY_LAYER),
)

# Imports that break the rule today, each with why it is let through: (importing module, imported
# module), both as prefixes, mapped to the reason. None today; an entry is a debt to pay, and
# test_every_exception_is_still_needed fails once the import it covers is gone.
EXCEPTIONS: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    path: Path
    line: int
    importer: str
    imported: str

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.importer} imports {self.imported}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, source: str | None = None, module: str | None = None) -> list[Import]:
    """Every import of a ``berth`` module in one file, wherever it stands in the file."""
    module = module or module_name(path)
    is_package = path.name == "__init__.py"
    tree = ast.parse(source if source is not None else path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        for name in _imported_names(node, module, is_package):
            if name == "berth" or name.startswith("berth."):
                found.append(Import(path, node.lineno, module, name))
    return found


def _imported_names(node: ast.AST, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            package = module.split(".") if is_package else module.split(".")[:-1]
            package = package[: len(package) - node.level + 1]
            base = ".".join(package + ([node.module] if node.module else []))
        # ``from berth.x import y`` imports the module berth.x.y when there is one, else a name of berth.x.
        names = [f"{base}.{alias.name}" if _is_module(f"{base}.{alias.name}") else base for alias in node.names]
        return list(dict.fromkeys(names)) if base else []
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute | ast.Name)
        and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
        in ("import_module", "__import__")
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return [node.args[0].value]
    return []


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_of(module: str) -> Layer | None:
    if module == "berth":
        return LAYERS["package"]
    best: tuple[int, Layer] | None = None
    for layer in LAYERS.values():
        for package in layer.packages:
            if package != "berth" and _under(module, package) and (best is None or len(package) > best[0]):
                best = (len(package), layer)
    return best[1] if best else None


def violations(found: list[Import]) -> list[str]:
    problems = []
    for edge in found:
        source, target = layer_of(edge.importer), layer_of(edge.imported)
        if source is None or target is None:
            problems.append(f"{edge}: not in any layer; add its package to LAYERS in tests/test_layers.py")
        elif target.name not in source.may_import and not _excepted(edge):
            problems.append(f"{edge}: layer {source.name} may not import layer {target.name}")
    return problems


def _excepted(edge: Import) -> bool:
    return any(_under(edge.importer, a) and _under(edge.imported, b) for a, b in EXCEPTIONS)


def every_import() -> list[Import]:
    return [edge for path in sorted(PACKAGE.rglob("*.py")) for edge in imports_of(path)]


def test_every_import_under_berth_follows_the_layer_rule():
    problems = violations(every_import())
    assert not problems, "imports against the layer rule (docs/architecture.md):\n" + "\n".join(problems)


def test_every_module_under_berth_belongs_to_a_layer():
    homeless = [str(path.relative_to(ROOT)) for path in PACKAGE.rglob("*.py") if layer_of(module_name(path)) is None]
    assert not homeless, f"add their packages to LAYERS in tests/test_layers.py: {homeless}"


def test_every_exception_is_still_needed():
    found = every_import()
    unused = [
        pair
        for pair in EXCEPTIONS
        if not any(_under(e.importer, pair[0]) and _under(e.imported, pair[1]) for e in found)
    ]
    assert not unused, f"these exceptions no longer match any import; remove them from EXCEPTIONS: {unused}"


def import_circles(found: list[Import]) -> list[list[str]]:
    """The groups of modules that import one another in a circle (strongly connected components of
    more than one module, or a module importing itself), found with Tarjan's algorithm."""
    graph: dict[str, set[str]] = {}
    for edge in found:
        graph.setdefault(edge.importer, set()).add(edge.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1 or module in graph.get(module, ()):
                circles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(circles)


def test_no_modules_import_one_another_in_a_circle():
    # Every import counts, in a function or under TYPE_CHECKING too: a circle hidden in either is
    # still two modules that cannot be understood, or moved, one without the other.
    circles = import_circles([e for e in every_import() if e.importer != "berth"])
    assert not circles, "modules that import one another in a circle:\n" + "\n".join(map(" <-> ".join, circles))


def test_the_circle_check_finds_a_circle_through_type_checking():
    a = imports_of(
        ROOT / "berth/domain/a.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from berth.domain.b import B\n",
        "berth.domain.a",
    )
    b = imports_of(ROOT / "berth/domain/b.py", "def f():\n    from berth.domain.a import A\n", "berth.domain.b")
    c = imports_of(ROOT / "berth/domain/c.py", "from berth.domain.a import A\n", "berth.domain.c")
    assert import_circles(a + b + c) == [["berth.domain.a", "berth.domain.b"]]
    assert import_circles(a + c) == []


def test_the_layers_may_import_one_another_in_no_circle():
    found = [
        Import(ROOT, 0, layer.packages[0], other.packages[0])
        for layer in LAYERS.values()
        for other in LAYERS.values()
        if other.name in layer.may_import and other is not layer and layer.name != "package"
    ]
    assert import_circles(found) == []


def test_the_table_names_only_its_own_layers():
    assert set(LAYERS) == _EVERY_LAYER
    for layer in LAYERS.values():
        assert layer.may_import <= set(LAYERS), layer


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        (
            "berth.domain.example",
            "import os\n\ndef late():\n    from berth.store import database\n",
            [
                "berth/domain/example.py:4: berth.domain.example imports berth.store.database: "
                "layer domain may not import layer store"
            ],
        ),
        (
            "berth.tracker.example",
            "import berth.api.app\n",
            [
                "berth/tracker/example.py:1: berth.tracker.example imports berth.api.app: "
                "layer tracker may not import layer api"
            ],
        ),
        (
            "berth.store.example",
            "from ..api import app\n",
            [
                "berth/store/example.py:1: berth.store.example imports berth.api.app: "
                "layer store may not import layer api"
            ],
        ),
        (
            "berth.scheduler.example",
            "import importlib\nimportlib.import_module('berth.store.database')\n",
            [
                "berth/scheduler/example.py:2: berth.scheduler.example imports berth.store.database: "
                "layer scheduler may not import layer store"
            ],
        ),
        ("berth.scheduler.example", "from berth.clients.agent import AgentClient\n", []),
        (
            "berth.scheduler.example",
            "from berth.tracker.moving.moves import start_move\n",
            [
                "berth/scheduler/example.py:1: berth.scheduler.example imports berth.tracker.moving.moves: "
                "layer scheduler may not import layer tracker"
            ],
        ),
        (
            "berth.clients.example",
            "from berth.tracker.errors import TrackerError\nfrom berth.domain.host.records import ClaimRecord\n",
            [
                "berth/clients/example.py:1: berth.clients.example imports berth.tracker.errors: "
                "layer clients may not import layer tracker"
            ],
        ),
        ("berth.cli.example", "from berth.testbed import server\nfrom berth.api import wsgi\n", []),
        # The conductors' HTTP API shares the service's plumbing (berth.web), never the service itself;
        # its package need not exist for its row to hold.
        (
            "berth.conductor.api.example",
            "from berth.web.access.auth import Caller\nfrom berth.conductor import journal\n",
            [],
        ),
        (
            "berth.conductor.api.example",
            "from berth.api.app import PlacementApp\n",
            [
                "berth/conductor/api/example.py:1: berth.conductor.api.example imports berth.api.app: "
                "layer conductor.api may not import layer api"
            ],
        ),
        (
            "berth.conductor.example",
            "from berth.web.access import auth\n",
            [
                "berth/conductor/example.py:1: berth.conductor.example imports berth.web.access.auth: "
                "layer conductor may not import layer web"
            ],
        ),
        (
            "berth.web.example",
            "from berth.api import policy\n",
            ["berth/web/example.py:1: berth.web.example imports berth.api.policy: layer web may not import layer api"],
        ),
        ("berth.store.pick.example", "from berth.store.candidates.finder import CandidateFinder\n", []),
        (
            "berth.store.candidates.example",
            "from berth.store.pick.request import PickRequest\n",
            [
                "berth/store/candidates/example.py:1: berth.store.candidates.example imports "
                "berth.store.pick.request: layer store.candidates may not import layer store.pick"
            ],
        ),
        (
            "berth.store.placement.example",
            "from berth.store.leases import ledger\n",
            [
                "berth/store/placement/example.py:1: berth.store.placement.example imports "
                "berth.store.leases.ledger: layer store.placement may not import layer store.leases"
            ],
        ),
        (
            "berth.store.example",
            "from berth.store.placement import providers\n",
            [
                "berth/store/example.py:1: berth.store.example imports berth.store.placement.providers: "
                "layer store may not import layer store.placement"
            ],
        ),
        (
            "berth.testbed.example",
            "from berth.cli import main\n",
            [
                "berth/testbed/example.py:1: berth.testbed.example imports berth.cli.main: "
                "layer testbed may not import layer cli"
            ],
        ),
    ],
)
def test_the_check_finds_forbidden_imports_anywhere_in_a_file(module, source, expected):
    path = ROOT / (module.replace(".", "/") + ".py")
    assert violations(imports_of(path, source, module)) == expected


def test_an_exception_lets_through_the_imports_it_names_only(monkeypatch):
    module = "berth.scheduler.example"
    source = "from berth.tracker.moving.moves import start_move\nfrom berth.tracker.errors import TrackerError\n"
    found = imports_of(ROOT / "berth/scheduler/example.py", source, module)
    monkeypatch.setitem(EXCEPTIONS, (module, "berth.tracker.moving.moves"), "a reason")
    assert violations(found) == [
        "berth/scheduler/example.py:2: berth.scheduler.example imports berth.tracker.errors: "
        "layer scheduler may not import layer tracker"
    ]
