"""A results folder's file and folder names live in scaling.store.layout alone: a module that
spells one out in a path (`out / "sweep.yaml"`, `Path(out, "runs")`, `out.glob("runs/*")`)
keeps a second copy of the contract others read, which drifts. Only path expressions are
scanned, so a JSON key that happens to read "runs" or "base" is no finding."""

from __future__ import annotations

import ast
from pathlib import Path

from scaling.store import layout

PACKAGE = Path(__file__).resolve().parents[1] / "scaling"
LAYOUT = PACKAGE / "store" / "layout.py"
NAMES = frozenset(value for key, value in vars(layout).items()
                  if key.isupper() and isinstance(value, str))
PATH_CALLS = {"Path", "PurePath", "glob", "rglob"}


def _pieces(node: ast.AST) -> list[ast.Constant]:
    """The literal text of a path operand: a string, an f-string's literal parts, or either
    branch of a conditional."""
    if isinstance(node, ast.IfExp):
        return _pieces(node.body) + _pieces(node.orelse)
    if isinstance(node, ast.JoinedStr):
        return [p for p in node.values if isinstance(p, ast.Constant)]
    return [node] if isinstance(node, ast.Constant) and isinstance(node.value, str) else []


def _operands(node: ast.AST) -> list[ast.AST]:
    """What a node joins into a path: both sides of `/`, the arguments of Path() or a glob."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return [node.left, node.right]
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        return list(node.args) if name in PATH_CALLS else []
    return []


def path_literals(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every literal in a path expression with a layout name as a component."""
    return sorted((piece.lineno, piece.value) for node in ast.walk(tree)
                  for operand in _operands(node) for piece in _pieces(operand)
                  if NAMES & set(piece.value.split("/")))


def test_only_the_layout_spells_a_results_folder_name_in_a_path():
    found = [f"{path.relative_to(PACKAGE.parent)}:{line} {text!r}"
             for path in sorted(PACKAGE.rglob("*.py")) if path != LAYOUT
             for line, text in path_literals(ast.parse(path.read_text()))]
    assert not found, ("take these names from scaling.store.layout:\n" + "\n".join(found))


def test_the_scan_sees_a_name_spelled_in_a_path():
    """The scan above is only worth something if it can fail; keys of JSON content and a
    default --out root are no path inside a results folder."""
    code = '\n'.join([
        'a = out / "sweep.yaml"',
        'b = Path(out, "runs") / run_id',
        'c = out.glob("runs/*/summary.json")',
        'd = stage / ("runs" if single else "cells")',
        'e = out / f"base/{name}"',
        'f = record["runs"], {"base": 1}',
        'g = Path(args.out or f"runs/{name}")',
        'h = out / layout.SWEEP_YAML / f"{group}.lock"',
    ])
    assert path_literals(ast.parse(code)) == [
        (1, "sweep.yaml"), (2, "runs"), (3, "runs/*/summary.json"), (4, "cells"), (4, "runs"),
        (5, "base/")]


def test_each_name_is_one_file_or_folder():
    """Two constants naming the same file would be two owners of it."""
    strings = [v for k, v in vars(layout).items() if k.isupper() and isinstance(v, str)]
    assert len(strings) == len(set(strings))


def test_the_layout_imports_nothing_heavy():
    """The jax-free commands (scaling plan, --help) read the layout too."""
    tree = ast.parse(LAYOUT.read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert imported <= {"__future__", "pathlib"}
