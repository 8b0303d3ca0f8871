"""The package's shape, checked on its source: no function over 50 lines, no module over 400,
no class over 250; the report never reaches back into the sweep; no training loop outside
the engine. Small pieces are what keep the layered package readable in one sitting."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "scaling"
MAX_FUNCTION, MAX_MODULE, MAX_CLASS = 50, 400, 250


def _sources() -> list[tuple[Path, str, ast.Module]]:
    return [(p, text, ast.parse(text)) for p in sorted(PACKAGE.rglob("*.py"))
            for text in [p.read_text()]]


def _span(node: ast.AST) -> int:
    return node.end_lineno - node.lineno + 1


def oversized(sources: list[tuple[Path, str, ast.Module]]) -> list[str]:
    """Every module, class and function over its limit, as 'path:line name: lines'."""
    out = []
    for path, text, tree in sources:
        name = path.relative_to(PACKAGE.parent)
        if len(text.splitlines()) > MAX_MODULE:
            out.append(f"{name}: {len(text.splitlines())} lines (module, at most {MAX_MODULE})")
        for node in ast.walk(tree):
            limit = (MAX_FUNCTION if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                     else MAX_CLASS if isinstance(node, ast.ClassDef) else None)
            if limit is not None and _span(node) > limit:
                out.append(f"{name}:{node.lineno} {node.name}: {_span(node)} lines (at most {limit})")
    return out


def test_no_function_class_or_module_is_too_long():
    found = oversized(_sources())
    assert not found, "\n".join(found)


def test_the_size_check_sees_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(60))
    text = f"def long():\n{body}\n"
    assert oversized([(PACKAGE / "x.py", text, ast.parse(text))]) == [
        "scaling/x.py:1 long: 61 lines (at most 50)"]


def test_the_report_imports_nothing_from_the_sweep():
    wrong = [f"{p.relative_to(PACKAGE.parent)}: imports {n.module}"
             for p, _, tree in _sources() if p.parent.name == "report"
             for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
             and (n.module or "").startswith("scaling.sweep")]
    assert not wrong, "\n".join(wrong)


def test_only_the_engine_applies_updates():
    """optax.apply_updates, the step of every training loop, appears only in scaling/train
    (the engine, and the tutorial loop `scaling bench` times it against)."""
    found = [f"{p.relative_to(PACKAGE.parent)}:{n.lineno}"
             for p, _, tree in _sources() if p.parent.name != "train"
             for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "apply_updates"]
    assert not found, "a training loop outside scaling/train: " + ", ".join(found)
