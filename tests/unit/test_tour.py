"""docs/tour.md, the learner's path through the code, stays true: its counts are the files' own
(blank lines left out) and the path's total is within the limit; every module of the core that
the path reaches through its imports, however indirectly, is on the path or named as a step taken
on trust; and the path never reaches the layers above it."""

import ast
import re

import pytest

from tests.helpers import ROOT

LIMIT = 1500
TOUR = ROOT / "docs" / "tour.md"
CORE = ("data", "model", "training")  # the packages whose every reached module is accounted for
ABOVE = ("lab", "reports", "generation", "benchmarks")  # never reached from the path


def counted_lines(path):
    """Lines as a reader counts them: docstrings and comments do, blank lines do not."""
    return sum(1 for line in (ROOT / path).read_text().splitlines() if line.strip())


def tour_text():
    return TOUR.read_text()


def path_rows(text):
    """(file, lines) of each numbered row of the path's table, and the total row's count."""
    rows = [(m[1], int(m[2])) for m in re.finditer(r"^\| \d+ \| `([^`]+)` \| (\d+) \|", text, re.M)]
    total = re.search(r"^\| \| \*\*total\*\* \| \*\*(\d+)\*\* \|", text, re.M)
    return rows, int(total[1]) if total else None


def after_rows(text):
    """(file, lines) of the rows after the path: the attention of "it"."""
    return [(m[1], int(m[2])) for m in re.finditer(r"^\| `([^`]+)` \| (\d+) \|", text, re.M)]


def trusted(text):
    """The steps taken on trust: {path: its one line}; a path ending in / is a whole package."""
    section = text.split("## Steps you may take on trust", 1)[1].split("\n## ", 1)[0]
    return {m[1]: m[2] for m in re.finditer(r"^- `([^`]+)`: (.+)$", section, re.M)}


def module_file(name):
    """The file of project module `name` (a.b.c), or None for a module not in the project."""
    for path in (
        ROOT / (name.replace(".", "/") + ".py"),
        ROOT / name.replace(".", "/") / "__init__.py",
    ):
        if path.is_file():
            return path.relative_to(ROOT).as_posix()
    return None


def imports_of(path):
    """The project files `path` imports, anywhere in it (a function's late import too)."""
    found = set()
    for node in ast.walk(ast.parse((ROOT / path).read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    files = {module_file(name) for name in found}
    for f in list(files):  # importing a.b.c runs the packages a and a.b too
        parts = (f or "").split("/")[:-1]
        files |= {module_file(".".join(parts[:i])) for i in range(1, len(parts) + 1)}
    return {f for f in files if f}


def reached(start, follow):
    """Every project file reached from the files `start` through imports, following only the
    files for which follow(file) is true (the others are reached but not read further)."""
    seen, todo = set(), list(start)
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        if follow(path):
            todo.extend(imports_of(path) - seen)
    return seen


def in_core(path):
    return path.split("/")[0] in CORE


def accounted(path, on_path, trust):
    folder_trusted = any(t.endswith("/") and path.startswith(t) for t in trust)
    empty_init = path.endswith("__init__.py") and counted_lines(path) == 0
    return path in on_path or path in trust or folder_trusted or empty_init


def test_the_tour_counts_are_the_files_own_and_the_path_within_the_limit():
    text = tour_text()
    rows, total = path_rows(text)
    assert len(rows) >= 8, "the tour names the path's files"
    shown = rows + after_rows(text)
    wrong = {p: (n, counted_lines(p)) for p, n in shown if counted_lines(p) != n}
    assert wrong == {}, f"tour counts (said, real) that differ: {wrong}"
    assert total == sum(n for _, n in rows)
    assert total <= LIMIT


def test_every_core_module_the_path_reaches_is_on_it_or_taken_on_trust():
    text = tour_text()
    on_path = {p for p, _ in path_rows(text)[0]}
    trust = trusted(text)
    core = {p for p in reached(on_path, in_core) if in_core(p)}
    missing = sorted(p for p in core if not accounted(p, on_path, trust))
    assert missing == [], f"reached from the tour's path but not on it or taken on trust: {missing}"
    assert all(len(line.split()) >= 3 for line in trust.values()), "each trusted step says what"


def test_the_tour_names_only_what_the_path_reaches():
    # A step taken on trust that nothing on the path imports is a stale line.
    text = tour_text()
    on_path = {p for p, _ in path_rows(text)[0]}
    core = reached(on_path, in_core)
    stale = [t for t in trusted(text) if not any(p == t or p.startswith(t) for p in core)]
    assert stale == []


def test_the_path_never_reaches_the_layers_above_it():
    on_path = {p for p, _ in path_rows(tour_text())[0]} | {p for p, _ in after_rows(tour_text())}
    everything = reached(on_path, lambda path: True)
    assert sorted(p for p in everything if p.split("/")[0] in ABOVE) == []


@pytest.mark.parametrize(
    "source, imported",
    [
        ("from training.loop import train\n", {"training/loop.py", "training/__init__.py"}),
        ("def f():\n    import model.gpt\n", {"model/gpt.py", "model/__init__.py"}),
        ("import torch\nfrom . import x\n", set()),  # outside the project; relative: none here
    ],
)
def test_imports_are_found_where_a_reader_meets_them(tmp_path, source, imported):
    module = tmp_path / "module.py"  # ROOT / an absolute path is that path
    module.write_text(source)
    assert imports_of(module) == imported


def test_a_module_the_tour_does_not_account_for_fails_it():
    text = tour_text()
    on_path = {p for p, _ in path_rows(text)[0]}
    trust = trusted(text)
    trust.pop("training/seeds.py")  # as if the loop had started importing a module the tour lacks
    core = {p for p in reached(on_path, in_core) if in_core(p)}
    assert [p for p in core if not accounted(p, on_path, trust)] == ["training/seeds.py"]
