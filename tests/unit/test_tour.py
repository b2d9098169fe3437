"""docs/tour.md, the learner's path through the code, stays true: every file it names exists,
its line count is the file's own (blank lines left out), the total is their sum and within the
limit, and the path's files import nothing of the layers the tour says a learner may skip."""

import re

from tests.helpers import ROOT, imported_names

LIMIT = 1500
TOUR = ROOT / "docs" / "tour.md"
# The layers above the core: none of the path's files imports them.
SKIPPABLE = {"lab", "reports", "generation", "runs", "benchmarks"}


def tour_rows():
    """(file, lines) of each numbered row of the tour's table, and the total row's count."""
    rows, total = [], None
    for line in TOUR.read_text().splitlines():
        if m := re.match(r"\| \d+ \| `([^`]+)` \| (\d+) \|", line):
            rows.append((m[1], int(m[2])))
        elif m := re.match(r"\| \| \*\*total\*\* \| \*\*(\d+)\*\* \|", line):
            total = int(m[1])
    return rows, total


def counted_lines(path):
    return sum(1 for line in (ROOT / path).read_text().splitlines() if line.strip())


def test_the_tour_counts_are_the_files_own_and_within_the_limit():
    rows, total = tour_rows()
    assert len(rows) >= 8, "the tour names the path's files"
    wrong = {p: (n, counted_lines(p)) for p, n in rows if counted_lines(p) != n}
    assert wrong == {}, f"tour counts (said, real) that differ: {wrong}"
    assert total == sum(n for _, n in rows)
    assert total <= LIMIT


def test_the_path_imports_none_of_the_layers_above_it():
    rows, _ = tour_rows()
    above = {p: imported_names(p) & SKIPPABLE for p, _ in rows}
    assert {p: names for p, names in above.items() if names} == {}


def test_the_tour_counts_a_file_as_a_reader_does():
    # Docstrings and comments count, blank and whitespace-only lines do not.
    lines = ['"""Doc."""', "", "   ", "# why", "x = 1", ""]
    assert sum(1 for line in lines if line.strip()) == 3
