"""The layout's rules, read from the source: imports point one way, presentation reads public names.

Every ``import`` statement in ``capnb`` counts, at module level or inside a function (a lazy import
is still a dependency). Each rule's failure names the module, the line and the import.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "capnb"
STEPS = ("forecast", "memory", "capacity", "latency", "elasticity", "plan")
PRESENTATION = ("charts", "widgets", "report", "cli", "notebook")


def _module_name(path: Path) -> str:
    parts = ("capnb", *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _imports(name: str):
    """(line, imported module, imported names) for every import in a module, resolved to absolute."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    package = name if _is_package(name) else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield node.lineno, target, tuple(a.name for a in node.names)


def _edges(name: str):
    """The capnb modules a module imports: submodules named in ``from x import y`` count as such."""
    for line, target, names in _imports(name):
        if not target.startswith("capnb"):
            continue
        hits = [f"{target}.{n}" for n in names if f"{target}.{n}" in MODULES]
        if len(hits) < len(names) or not names:
            hits.append(target)
        for hit in hits:
            # importing a.b.c runs a and a.b first, except the packages the importer sits in
            parts = hit.split(".")
            for i in range(2, len(parts) + 1):
                parent = ".".join(parts[:i])
                if parent in MODULES and not name.startswith(parent + ".") and parent != name:
                    yield line, parent


def test_every_module_is_seen():
    assert {"capnb.forecast", "capnb.plan._build", "capnb.kernels.autoscale"} <= set(MODULES)


def test_no_import_cycle():
    graph = {name: {t for _, t in _edges(name)} for name in MODULES}
    # Tarjan's strongly connected components, iteratively
    index, low, on_stack, stack, cycles, counter = {}, {}, set(), [], [], [0]

    def visit(root):
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
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
                        cycles.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    assert cycles == [], f"import cycles: {cycles}"


@pytest.mark.parametrize("step", STEPS)
def test_private_modules_never_import_their_own_package(step):
    package = f"capnb.{step}"
    offenders = []
    for name in MODULES:
        if not name.startswith(package + ".") or name == package:
            continue
        for line, target, names in _imports(name):
            if target == package and not all(f"{package}.{n}" in MODULES for n in names):
                offenders.append(f"{name}:{line} imports {package}'s __init__ ({', '.join(names)})")
    assert offenders == []


def _private(target: str, importer: str) -> bool:
    """Whether an imported module path reaches into another package's private part."""
    own = importer.split(".")[:2]  # capnb.charts: its own private modules are its business
    parts = target.split(".")
    return any(p.startswith("_") for p in parts[1:]) and parts[:2] != own


@pytest.mark.parametrize("area", PRESENTATION)
def test_presentation_imports_public_names_only(area):
    offenders = []
    for name in MODULES:
        if name != f"capnb.{area}" and not name.startswith(f"capnb.{area}."):
            continue
        for line, target, names in _imports(name):
            if not target.startswith("capnb"):
                continue
            if _private(target, name):
                offenders.append(f"{name}:{line} imports the private module {target}")
            own = target.split(".")[:2] == name.split(".")[:2]
            hidden = [n for n in names if n.startswith("_") and not n.startswith("__") and not own]
            if hidden:
                offenders.append(f"{name}:{line} imports private names {hidden} from {target}")
    assert offenders == []


def test_kernels_import_numpy_numba_and_the_standard_library_only():
    allowed = {"numpy", "numba", "__future__"} | set(sys.stdlib_module_names)
    offenders = []
    for name in MODULES:
        if not name.startswith("capnb.kernels"):
            continue
        for line, target, _ in _imports(name):
            top = target.split(".")[0]
            if target.startswith("capnb.kernels") or top in allowed:
                continue
            if name == "capnb.kernels._lazy" and top == "filelock":
                continue  # the compile lock over numba's disk cache, shared between processes
            offenders.append(f"{name}:{line} imports {target}")
    assert offenders == []


def test_the_documented_layout_matches_the_tree():
    readme = (ROOT.parent / "docs" / "development.md").read_text(encoding="utf-8")
    layout = readme.split("## Layout", 1)[1].split("```", 2)[1]
    tokens = {t.rstrip(":,").rstrip("/") for t in layout.split()}
    listed = {t for t in tokens if t.startswith("capnb/")}
    packages = {
        f"capnb/{p.parent.relative_to(ROOT).as_posix()}"
        for p in ROOT.rglob("__init__.py")
        if p.parent != ROOT
    }
    public = {f"capnb/{p.name}" for p in ROOT.glob("*.py") if not p.name.startswith("_")}
    assert listed == packages | public, (
        sorted((packages | public) - listed),
        sorted(listed - packages - public),
    )
    for folder in ("notebooks", "datasets", "tests"):
        assert folder in tokens and (ROOT.parent / folder).is_dir()


#: Issue 32: the longest function in the package (a long one holds several ideas; split it).
LONGEST_FUNCTION = 150


def test_no_function_in_the_package_is_longer_than_the_limit():
    found = {}
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1  # decorators aside, docstring in
                if lines >= LONGEST_FUNCTION:
                    found[f"{name}.{node.name} (line {node.lineno})"] = lines
    assert found == {}
