"""Every number README.md and the pages under docs/ give for the default model is the saved JSON's
of one named run (docs/results/default.json): each marked table and number equals what
benchmarks/doc_results.py makes of that JSON, and its rewrite puts a stale one right."""

import pytest

from benchmarks.doc_results import (
    BLOCKS,
    COMMANDS,
    DOCS,
    RESULTS,
    ROOT,
    load_results,
    marks,
    number,
    rewrite_docs,
    rewritten,
)


@pytest.fixture(scope="module")
def results():
    return load_results()


def expected(results, name):
    return BLOCKS[name](results) if name in BLOCKS else number(results, name)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_marked_number_and_table_is_the_saved_runs(results, doc):
    stale = [
        (name, found, want)
        for name, found in marks(doc.read_text())
        if found != (want := expected(results, name))
    ]
    assert stale == [], f"{doc.name}: run `make doc-results` (or --docs-only): {stale[:3]}"


def test_the_readme_and_the_findings_quote_the_run_through_marks():
    assert DOCS[0] == ROOT / "README.md"
    assert "attention" in dict(marks(DOCS[0].read_text()))  # the headline sentence's map
    findings = RESULTS.parent.parent / "findings"
    default = dict(marks((findings / "default-model.md").read_text()))
    assert {"probe", "natural"} <= set(default)
    assert sum(":" in name for name in default) >= 15  # the prose's numbers
    mechanism = dict(marks((findings / "mechanism.md").read_text()))
    blocks = {"answer-table", "query-next", "causal", "lens", "patching", "circuit", "choice-table"}
    assert blocks <= set(mechanism)
    assert set(DOCS) >= set(findings.glob("*.md"))  # every findings page is rewritten and held


def test_the_results_name_their_run_and_the_commands_that_printed_them(results):
    assert results["made_by"] == f"python -m benchmarks.doc_results {results['run']}"
    assert set(results["commands"]) == set(COMMANDS) == set(results["outputs"])
    for line in results["commands"].values():
        assert line.startswith(f"python generate.py --ckpt {results['run']} ")
    assert len(results["ckpt_sha256"]) == 64
    assert results["outputs"]["probe"]["test_set"] == "test"
    assert results["outputs"]["natural"]["test_set"] == "natural"
    assert results["outputs"]["query_next"]["query"] == "next"


def test_a_stale_number_or_table_is_rewritten_and_a_second_rewrite_changes_nothing(
    results, tmp_path
):
    doc = tmp_path / "page.md"
    doc.write_text(
        "best <!--n:probe.best_head.test:pct-->12.3%<!--/n--> by "
        "<!--n:probe.best_head:head-->L9 H9<!--/n-->\n\n<!-- results:probe -->\nold\n"
        "<!-- /results -->\n"
    )
    assert rewrite_docs(results, [doc]) == [doc]
    text = doc.read_text()
    best = results["outputs"]["probe"]["best_head"]
    assert f"<!--n:probe.best_head.test:pct-->{best['test']:.1%}<!--/n-->" in text
    assert f"L{best['layer']} H{best['head']}<!--/n-->" in text
    assert "old" not in text and "test cand@1 by layer" in text
    assert rewrite_docs(results, [doc]) == [] and rewritten(text, results) == text


def test_a_mark_the_results_cannot_fill_is_an_error(results):
    with pytest.raises(ValueError, match="format"):
        number(results, "probe.best_head.test:percent")
    with pytest.raises(KeyError, match="probe.no_such_key"):
        number(results, "probe.no_such_key:pct")


def test_a_doc_with_a_mark_the_results_lack_is_refused_whole(results, tmp_path):
    doc = tmp_path / "page.md"
    before = "<!--n:probe.best_head.test:pct-->1%<!--/n--> <!--n:probe.gone.x:pct-->2%<!--/n-->\n"
    doc.write_text(before)
    with pytest.raises(ValueError, match="page.md: number mark 'probe.gone.x:pct'"):
        rewrite_docs(results, [doc])
    assert doc.read_text() == before  # nothing half-rewritten
