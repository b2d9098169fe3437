"""The house as a newcomer reads it: layers only look down, the layout table
(docs/reference/layout.md) is the tree, and pyproject.toml's dependencies are the requirements
files'."""

import ast
import re

import pytest

from tests.helpers import ROOT

# What each floor may import from the project (itself included); lower floors first.
MAY_IMPORT = {
    "checks": set(),
    "cli": set(),  # the scripts' parser, beside checks.py
    "storage": {"storage"},
    "model": {"model", "storage", "checks"},
    "data": {"data", "storage", "checks"},
    "configs": {"configs", "model", "data", "checks"},
    # analysis/ computes (numbers and typed errors), reports/ shows them (terminal and page):
    # the computing side never imports the showing side.
    "analysis": {"analysis", "model", "data", "storage", "checks"},
    "runs": {"runs", "analysis", "model", "data", "storage", "checks"},  # probe.json's type
    "reports": {"reports", "analysis", "model", "data", "storage", "checks"},
    "training": {
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


def imported_names(path):
    """The top-level names that the file imports, anywhere in it (lazy imports too)."""
    names = set()
    for node in ast.walk(ast.parse((ROOT / path).read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


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


def test_transformer_lens_is_a_reference_of_the_tests_only():
    # requirements-test.txt installs it to check the hook points against; a user's install
    # (requirements.txt) has no such package, so no module of the project may import it.
    importers = [p for p in project_modules() if "transformer_lens" in imported_names(p)]
    assert importers == [], f"{importers} import transformer_lens, which only the tests install"


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
