"""The package's modules import one way: no circle of modules importing each other.

The graph is read from the source with ``ast``, so every import counts: at the top of a
module, inside a function, under ``TYPE_CHECKING``. An import put inside a function or
under ``TYPE_CHECKING`` only to dodge a circle still closes the circle here; the cure is
to move what both modules need down a layer (docs/decisions.md, "Modules import one
way"). Imports kept inside functions for start-up time (scipy, asyncssh, psycopg, rich)
are fine: they close no circle. A package's ``__init__`` is a module like the others,
reached where a name is imported from it; the parent packages Python runs first are not
edges (the package's are empty, or re-export their own modules).
"""

from __future__ import annotations

import ast
from pathlib import Path

import syncrep_lab

PACKAGE = Path(syncrep_lab.__file__).parent

# Circles allowed to stay, each with its reason: (the modules of the circle, why).
# Empty: none is needed today. A circle put here must be one the layers cannot undo.
ALLOWED: list[tuple[frozenset[str], str]] = []


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolved(name: str, known: dict[str, Path]) -> str | None:
    """The package's module that ``name`` is, or that holds it (``a.b.f``: ``a.b``)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every module of the package that ``name`` imports, wherever in it the import is."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            wanted = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from a.b import c``: the module a.b.c when there is one, else a.b
            wanted = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for each in wanted:
            target = _resolved(each, known)
            if target is not None and target != name:
                out.add(target)
    return out


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative), each sorted, in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def shortest_cycle(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """The shortest way from the component's first module back to itself, inside it."""
    start, members = component[0], set(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & members):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if nxt not in came_from:
                    came_from[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"{component} is no circle")


def _described(component: list[str], graph: dict[str, set[str]]) -> str:
    members = set(component)
    edges = [f"    {m} -> {', '.join(sorted(graph[m] & members))}" for m in component]
    return "\n".join([f"  {len(component)} modules, e.g. "
                      f"{' -> '.join(shortest_cycle(component, graph))}:", *edges])


def test_no_import_circles() -> None:
    graph = import_graph()
    allowed = {members for members, _ in ALLOWED}
    bad = [c for c in circles(graph) if frozenset(c) not in allowed]
    assert not bad, ("modules that import each other (move what they share down a layer):\n"
                     + "\n".join(_described(c, graph) for c in bad))


def test_allowed_circles_still_exist() -> None:
    """An exception whose circle is gone is taken off the list."""
    found = {frozenset(c) for c in circles(import_graph())}
    stale = [sorted(members) for members, _ in ALLOWED if members not in found]
    assert not stale, f"no longer circles, take them off ALLOWED: {stale}"


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    """A top-level, a function's, a TYPE_CHECKING and a relative import are all edges,
    and a circle made of them is found."""
    known = {"p": tmp_path / "p/__init__.py", "p.a": tmp_path / "p/a.py",
             "p.b": tmp_path / "p/b.py", "p.c": tmp_path / "p/c.py"}
    for path in known.values():
        path.parent.mkdir(exist_ok=True)
    known["p"].write_text("")
    known["p.a"].write_text("from typing import TYPE_CHECKING\n"
                            "if TYPE_CHECKING:\n    from p.b import B\n")
    known["p.b"].write_text("def f() -> None:\n    from . import c\n")
    known["p.c"].write_text("import p.a\nimport os\n")
    graph = {n: imports_of(n, p, known) for n, p in known.items()}
    assert graph == {"p": set(), "p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}}
    assert circles(graph) == [["p.a", "p.b", "p.c"]]
    assert shortest_cycle(["p.a", "p.b", "p.c"], graph) == ["p.a", "p.b", "p.c", "p.a"]
