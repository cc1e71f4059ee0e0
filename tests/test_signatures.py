"""What analysis returns is typed all the way to the presenters: no public function of
analysis/, report/, terminal/ or patch_ab/ takes or returns ``Any``, and no public class
there has a field typed ``Any`` (docs/decisions.md, "Results with a shape: what keeps
them so"). ``Any`` inside a private helper or a function's body is not counted: it does
not cross a module's edge. Read with ``ast`` from the source, as the import test reads
the imports."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import syncrep_lab

PACKAGES = ("analysis", "report", "terminal", "patch_ab")
ROOT = Path(syncrep_lab.__file__).parent


def _mentions_any(node: ast.AST | None) -> bool:
    """The annotation names typing's Any (bare, as typing.Any, or inside a string)."""
    if node is None:
        return False
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id == "Any":
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "Any":
            return True
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            try:
                inner = ast.parse(sub.value, mode="eval")
            except SyntaxError:
                continue
            if _mentions_any(inner):
                return True
    return False


def _signature_mentions_any(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    args = fn.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs,
             *([args.vararg] if args.vararg else []), *([args.kwarg] if args.kwarg else [])]
    return _mentions_any(fn.returns) or any(_mentions_any(a.annotation) for a in every)


def public_any(path: Path) -> Iterator[str]:
    """Each public function (module level, or a method of a public class) whose signature
    names Any, and each public class's annotated field typed Any, as FILE:LINE NAME."""
    tree = ast.parse(path.read_text(), str(path))
    where = path.relative_to(ROOT.parent) if path.is_relative_to(ROOT.parent) else path
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if not node.name.startswith("_") and _signature_mentions_any(node):
                yield f"{where}:{node.lineno} {node.name}()"
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    public = not item.name.startswith("_") or item.name == "__init__"
                    if public and _signature_mentions_any(item):
                        yield f"{where}:{item.lineno} {node.name}.{item.name}()"
                elif isinstance(item, ast.AnnAssign) and _mentions_any(item.annotation):
                    yield f"{where}:{item.lineno} {node.name}.{ast.unparse(item.target)}"


def test_the_check_sees_any_where_it_is(tmp_path: Path) -> None:
    """The reader finds what it is meant to find (a check that could not fail is none)."""
    sample = tmp_path / "sample.py"
    text = '''
from typing import Any
import typing
def shown(x: int) -> dict[str, Any]: ...
def quoted(x: "list[Any]") -> None: ...
def _private(x: Any) -> Any: ...
class Row:
    value: typing.Any
    fine: int
    def method(self, *rest: Any) -> None: ...
    def _helper(self, x: Any) -> None: ...
class _Hidden:
    value: Any
'''
    sample.write_text(text)
    found = [f.split(" ", 1)[1] for f in public_any(sample)]
    assert found == ["shown()", "quoted()", "Row.value", "Row.method()"], found


def test_no_any_in_public_signatures() -> None:
    found = [f for package in PACKAGES for path in sorted((ROOT / package).glob("*.py"))
             for f in public_any(path)]
    assert not found, "public signatures or fields typed Any:\n" + "\n".join(found)
