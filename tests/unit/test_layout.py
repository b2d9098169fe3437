"""The house as a newcomer reads it: layers only look down, the layout table
(docs/reference/layout.md) is the tree, and pyproject.toml's dependencies are the requirements
files'."""

import ast
import re

import pytest

from tests.helpers import ROOT, imported_names

# What each floor may import from the project (itself included); lower floors first.
MAY_IMPORT = {
    "checks": set(),
    "cli": {"checks"},  # the scripts' parser, beside checks.py
    "storage": {"storage"},
    "model": {"model", "storage", "checks"},
    "data": {"data", "storage", "checks"},
    "configs": {"configs", "model", "data", "checks"},
    # analysis/ computes (numbers and typed errors), reports/ shows them (terminal and page):
    # the computing side never imports the showing side.
    "analysis": {"analysis", "model", "data", "storage", "checks"},
    "runs": {"runs", "analysis", "model", "data", "storage", "checks"},  # probe.json's type
    "reports": {"reports", "cli", "analysis", "model", "data", "storage", "checks"},
    # The core's training loop knows nothing of the lab: what watches it plugs in (lab/).
    "training": {
        "training",
        "cli",
        "runs",
        "configs",
        "model",
        "data",
        "storage",
        "checks",
    },
    # The lab: the training run as train.py runs it, the live probe and the plots.
    "lab": {
        "lab",
        "training",
        "reports",
        "analysis",
        "runs",
        "configs",
        "model",
        "data",
        "storage",
        "checks",
    },
    "generation": {
        "generation",
        "cli",
        "reports",
        "analysis",
        "runs",
        "configs",
        "model",
        "data",
        "storage",
        "checks",
    },
    # generate.py and its modes: not training
    "generate": {
        "generation",
        "reports",
        "analysis",
        "runs",
        "configs",
        "model",
        "data",
        "storage",
        "checks",
        "cli",
    },
    # bench.py and its benchmarks time every floor, generate.py's thread choice included
    "benchmarks": {
        "benchmarks",
        "lab",
        "generate",
        "generation",
        "training",
        "reports",
        "analysis",
        "runs",
        "configs",
        "model",
        "data",
        "storage",
        "checks",
    },
    "bench": {
        "benchmarks",
        "lab",
        "generate",
        "generation",
        "training",
        "reports",
        "analysis",
        "runs",
        "configs",
        "model",
        "data",
        "storage",
        "checks",
        "cli",
    },
}
PACKAGES = sorted(name for name in MAY_IMPORT if (ROOT / name).is_dir())


def project_modules():
    """Every module of the packages and the top-level scripts, as paths relative to ROOT."""
    files = [p for name in PACKAGES for p in (ROOT / name).rglob("*.py")]
    files += [p for p in ROOT.glob("*.py")]
    return sorted(str(p.relative_to(ROOT)) for p in files)


def imported_floors(path):
    """The project's top-level names that the file imports, anywhere in it."""
    return imported_names(path) & (set(MAY_IMPORT) | {"train", "bench"})


@pytest.mark.parametrize(
    "path", [p for p in project_modules() if p.split("/")[0].removesuffix(".py") in MAY_IMPORT]
)
def test_layers_only_look_down(path):
    floor = path.split("/")[0].removesuffix(".py")
    assert imported_floors(path) <= MAY_IMPORT[floor], (
        f"{path} imports {sorted(imported_floors(path) - MAY_IMPORT[floor])}"
    )


def module_of(path):
    """The dotted name of a project module: model/gpt.py is model.gpt, data/__init__.py data."""
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def imported_modules(path, modules):
    """The project's modules that the file imports, anywhere in it: `from a.b import c` is a.b.c
    where that is a module, else a.b."""
    found = set()
    for node in ast.walk(ast.parse((ROOT / path).read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module_of(path):
                found.add(name)
    return found


def import_cycles(graph):
    """Every import circle of `graph` {module: imported modules}, each as a list of modules
    (Tarjan's strongly connected components of more than one module)."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_no_module_imports_itself_back():
    # Across packages and inside one: a circle holds only by the order of its imports (a
    # delayed import, a type hint), and the reader cannot tell which module comes first.
    paths = [p for p in project_modules() if not p.startswith("tests/")]
    modules = {module_of(p): p for p in paths}
    graph = {m: imported_modules(p, modules) for m, p in modules.items()}
    # A package's __init__ that re-exports its modules is not a circle with them.
    for m in graph:
        graph[m] = {d for d in graph[m] if not m.startswith(d + ".")}
    assert import_cycles(graph) == []


def test_the_circle_check_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]


def test_transformer_lens_is_a_reference_of_the_tests_only():
    # requirements-test.txt installs it to check the hook points against; a user's install
    # (requirements.txt) has no such package, so no module of the project imports it at load
    # time. One call opens it on request (runs/bridge.py, inside the function, saying what to
    # install where it is missing).
    importers = [p for p in project_modules() if "transformer_lens" in imported_names(p)]
    ours = [p for p in importers if not p.startswith("tests/")]
    assert ours == ["runs/bridge.py"], (
        f"{ours} import transformer_lens, which only the tests install"
    )
    tree = ast.parse((ROOT / "runs/bridge.py").read_text())
    at_load = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert all("transformer_lens" not in ast.dump(n) for n in at_load)


def test_each_module_name_is_once_in_the_tree():
    # grep and open-by-name land on the one file: no two modules outside tests/ share a basename.
    names = {}
    for path in project_modules():
        if not path.startswith("tests/") and not path.endswith("__init__.py"):
            names.setdefault(path.rsplit("/", 1)[-1], []).append(path)
    shared = {name: paths for name, paths in names.items() if len(paths) > 1}
    assert shared == {}, f"modules that share a name: {shared}"


def layout_paths():
    """The paths named in the first column of the layout table."""
    page = (ROOT / "docs" / "reference" / "layout.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    return [path for row in rows for path in re.findall(r"`([^`]+)`", row.split(" | ")[0])]


def test_the_layout_table_is_the_tree():
    named = layout_paths()
    missing = [p for p in named if not (list(ROOT.glob(p)) if "*" in p else (ROOT / p).exists())]
    assert missing == [], f"the Layout table names paths that do not exist: {missing}"
    modules = [p for p in project_modules() if not p.endswith("__init__.py")]
    unlisted = [p for p in modules if p not in named]
    assert unlisted == [], f"the Layout table leaves out {unlisted}"


def test_pyproject_dependencies_are_the_requirements_files():
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from 3.11")

    def requirements(name):
        lines = (ROOT / name).read_text().splitlines()
        return [line.strip() for line in lines if line.strip() and not line.startswith(("#", "-r"))]

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == requirements("requirements.txt")
    assert project["optional-dependencies"]["test"] == requirements("requirements-test.txt")
