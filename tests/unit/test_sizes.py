"""docs/reference/style.md's sizes: a file of the packages holds at most 320 lines and a function
at most 70. The packages are the folders at the top of the tree with an __init__.py; the
top-level scripts (train.py, generate.py, bench.py) and the ground floor (checks.py, cli.py) are
held to the same limits. Tests are not: a test file is a list of cases."""

import ast

from tests.helpers import ROOT

MAX_FILE_LINES = 320
MAX_FUNCTION_LINES = 70


def package_files():
    """Every .py file of the packages and the top-level modules, as paths relative to ROOT."""
    packages = [p.parent for p in ROOT.glob("*/__init__.py") if p.parent.name != "tests"]
    files = [f for package in packages for f in package.rglob("*.py")] + list(ROOT.glob("*.py"))
    return sorted(str(f.relative_to(ROOT)) for f in files)


def long_functions(path):
    """(name, lines) of each function or method of the file longer than MAX_FUNCTION_LINES,
    counted from its def line to its last, decorators left out."""
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    return [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]


def test_the_walk_finds_the_packages_and_the_scripts():
    files = package_files()
    assert {"model/gpt.py", "data/pronouns/generator.py", "train.py", "cli.py"} <= set(files)
    assert not [f for f in files if f.startswith("tests/")]


def test_no_file_of_the_packages_is_over_320_lines():
    lines = {f: len((ROOT / f).read_text(encoding="utf-8").splitlines()) for f in package_files()}
    over = {f: n for f, n in lines.items() if n > MAX_FILE_LINES}
    assert over == {}, f"files over {MAX_FILE_LINES} lines (style.md): {over}"


def test_no_function_of_the_packages_is_over_70_lines():
    over = {f"{f}:{name}": n for f in package_files() for name, n in long_functions(f)}
    assert over == {}, f"functions over {MAX_FUNCTION_LINES} lines (style.md): {over}"
