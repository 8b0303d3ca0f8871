"""The package's layering (docs/architecture.md), checked by parsing every module's imports.

Layers in the order data flows; a module may import from its own layer and the ones before it,
never from a later one. No import cycles between modules, and no imports of the package's own
modules inside functions (they hide cycles and make the order above a lie).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from scaling.config.names import VIEW_TABLE

PACKAGE = Path(__file__).resolve().parents[1] / "scaling"
LAYERS = ("errors", "formatting", "gns", "tasks", "config", "train", "store", "sweep", "analysis", "report",
          "cli")
FOUNDATION = {"errors": 0, "formatting": 0, "gns": 0, "parabola": 0, "lr_curve": 0}  # leaf modules: every layer uses them


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int:
    """Rank of a module of the package: its top-level subpackage's place in LAYERS."""
    top = module.split(".")[1] if module.count(".") else ""
    if top in FOUNDATION:
        return FOUNDATION[top]
    if top not in LAYERS:
        raise AssertionError(f"{module}: not in any layer; add its subpackage to LAYERS and "
                             "docs/architecture.md")
    return LAYERS.index(top)


def imports(tree: ast.Module, module: str, is_package: bool) -> list[tuple[int, str, bool]]:
    """(line, imported module, at module level) for every import of the package's own modules."""
    top_level = {id(n) for n in tree.body}
    for node in tree.body:  # `if TYPE_CHECKING:` blocks count as module level
        if isinstance(node, ast.If):
            top_level.update(id(n) for n in node.body)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[:len(base) - node.level + (1 if is_package else 0)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            names = [f"{name}.{a.name}" for a in node.names]  # a module, or a name in one
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found += [(node.lineno, n, id(node) in top_level) for n in names
                  if n == "scaling" or n.startswith("scaling.")]
    return found


def graph() -> dict[str, list[tuple[int, str, bool]]]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        out[name] = imports(ast.parse(path.read_text()), name, path.name == "__init__.py")
    return out


def resolve(name: str, modules: set[str]) -> str:
    """`scaling.x.y` names a module, or a name inside module `scaling.x`."""
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


@pytest.fixture(scope="module")
def modules() -> dict[str, list[tuple[int, str, bool]]]:
    return graph()


def test_every_import_runs_towards_earlier_layers(modules):
    wrong = [f"{m}:{line} imports {target} (layer {LAYERS[layer(target)]} after "
             f"{LAYERS[layer(m)]})"
             for m, found in modules.items() if m != "scaling"
             for line, target, _ in found if layer(resolve(target, set(modules))) > layer(m)]
    assert not wrong, "\n".join(wrong)


def test_no_function_local_imports_of_the_package(modules):
    local = [f"{m}:{line} imports {target} inside a function"
             for m, found in modules.items() for line, target, top in found if not top]
    assert not local, "\n".join(local)


def test_no_import_cycles(modules):
    edges = {m: {resolve(t, set(modules)) for _, t, _ in found} - {m}
             for m, found in modules.items()}
    # a package's __init__ importing its own modules is how it re-exports them, not a cycle
    edges = {m: {t for t in ts if not t.startswith(m + ".")} for m, ts in edges.items()}
    state: dict[str, int] = {}
    cycles: list[str] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(path[path.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m, [m])
    assert not cycles, "\n".join(cycles)


def test_the_view_registry_imports_within_the_layering():
    """The analysis and the report import the modules the view registry names as they read it,
    where the checks above cannot see: each view's module is one the analysis may import, and
    its report's one the report may."""
    wrong = [f"{name}: {path} (layer {LAYERS[layer(path)]}, read by {reader})"
             for name, entry in VIEW_TABLE.items()
             for path, reader in ((entry.module, "analysis"), (entry.report_module, "report"))
             if layer(path) > LAYERS.index(reader)]
    assert not wrong, "\n".join(wrong)


def test_the_layering_check_sees_a_violation():
    """The checks above are only worth something if they can fail: a config module that
    imported the engine would be caught."""
    tree = ast.parse("from scaling.train import program\n\ndef f():\n    from scaling import store\n")
    found = imports(tree, "scaling.config.schema", False)
    assert found == [(1, "scaling.train.program", True), (4, "scaling.store", False)]
    assert layer("scaling.train.program") > layer("scaling.config.schema")


def test_every_module_is_named_in_its_package_and_in_the_architecture_doc():
    """A module a reader cannot find in docs/architecture.md or in its package's docstring is
    a room missing from the plan: each is named there in backticks."""
    doc = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    missing = []
    for init in sorted(PACKAGE.glob("*/**/__init__.py")):  # subpackages' too
        package_doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        for path in sorted(init.parent.glob("*.py")):
            name = f"`{path.stem}`"
            if path.name == "__init__.py":
                continue
            missing += [f"{path.relative_to(PACKAGE.parent)}: not in {where}"
                        for where, text in (("docs/architecture.md", doc),
                                            (f"{init.parent.relative_to(PACKAGE)}/__init__.py",
                                             package_doc))
                        if name not in text]
    assert not missing, "\n".join(missing)
