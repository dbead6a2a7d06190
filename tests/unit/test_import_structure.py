"""The gateway's rooms keep their arrows: no import circles among its
modules; the read path (`read/`) imports neither the write path nor
recovery nor autorecovery; the write path imports nothing of autorecovery.
Module-level imports only: an import under `if TYPE_CHECKING:` is for types
and runs nothing."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GATEWAY = ROOT / "services" / "gateway"
PACKAGE = "quire_gateway"
# What the read path must not lean on: it is below them (they read; it never writes or recovers).
NOT_BELOW_READ = ("quire_gateway.write", "quire_gateway.recovery", "quire_gateway.autorecovery")
# The auditor writes copies back through bookies, never through a writer's handle.
NOT_BELOW_WRITE = ("quire_gateway.autorecovery",)


def modules() -> dict[str, Path]:
    found = {}
    for path in (GATEWAY / PACKAGE).rglob("*.py"):
        parts = path.relative_to(GATEWAY).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports_of(path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules `path` imports at module level."""
    imported: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGE):
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                imported.add(submodule if submodule in known else node.module)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names if alias.name.startswith(PACKAGE))
    return {name for name in imported if name in known}


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(path, known) - {name} for name, path in known.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_the_gateway_has_no_import_circles():
    assert circles(import_graph()) == []


def leaning(graph: dict[str, set[str]], room: str, not_below: tuple[str, ...]) -> dict[str, list[str]]:
    """The modules of `room` that import one of `not_below`, and what."""
    return {
        module: sorted(i for i in imported if i.startswith(not_below))
        for module, imported in graph.items()
        if module.startswith(room) and any(i.startswith(not_below) for i in imported)
    }


def test_the_read_path_imports_neither_writes_nor_recovery_nor_autorecovery():
    graph = import_graph()
    assert f"{PACKAGE}.read.ledger_reads" in graph
    assert leaning(graph, f"{PACKAGE}.read", NOT_BELOW_READ) == {}


def test_the_write_path_imports_nothing_of_autorecovery():
    graph = import_graph()
    assert f"{PACKAGE}.autorecovery.auditor" in graph and f"{PACKAGE}.write.handle" in graph
    assert leaning(graph, f"{PACKAGE}.write", NOT_BELOW_WRITE) == {}


def test_the_checks_see_a_circle_and_an_arrow_upward():
    """The positive control: the same checks on a graph that has both."""
    graph = {
        "quire_gateway.read.ledger_reads": {"quire_gateway.write.handle"},
        "quire_gateway.write.handle": {"quire_gateway.ledgers"},
        "quire_gateway.ledgers": {"quire_gateway.write.handle"},
    }
    assert circles(graph) == [["quire_gateway.ledgers", "quire_gateway.write.handle"]]
    assert leaning(graph, "quire_gateway.read", NOT_BELOW_READ) == {
        "quire_gateway.read.ledger_reads": ["quire_gateway.write.handle"]
    }


def test_cluster_calls_import_nothing_of_the_metadata_cache():
    """The cache is a layer in front of ClusterCalls' metadata calls
    (metadata_store.py): ClusterCalls is below it and is not told of it."""
    graph = import_graph()
    assert graph[f"{PACKAGE}.cluster_calls"] and f"{PACKAGE}.metadata_cache" in graph
    assert f"{PACKAGE}.metadata_cache" not in graph[f"{PACKAGE}.cluster_calls"]
