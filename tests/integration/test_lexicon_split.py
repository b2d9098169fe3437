"""The natural set split by the training lexicon (analysis/lexicon_split.py): which sentences
have only lexicon nouns as candidates, and each group's numbers, as `--probe natural` reports
them in its JSON, its text and on the page."""

from collections import Counter

import pytest

from analysis.answer import METHODS, answers
from analysis.candidates import candidate_scores, winners
from analysis.conform import mismatches
from analysis.coreference import study
from analysis.lexicon_split import lexicon_group
from analysis.results import Study
from data.pronouns import NATURAL, Example, natural
from reports.probe_tables import probe_section
from reports.text_reports import study_report
from tests.helpers import make_run


def example(text, antecedent, distractor, pronoun):
    """An example of `text` whose spans are those of the words given (each once in it)."""

    def span(word):
        start = text.index(word)
        return start, start + len(word)

    return Example(text, span(pronoun), span(antecedent), (span(distractor),))


@pytest.mark.parametrize(
    ("sentence", "group"),
    [
        (
            example("The dogs chased the cat, and they were tired.", "dogs", "cat", "they"),
            "lexicon",
        ),
        (example("Cats watched the dog until it slept.", "dog", "Cats", "it"), "lexicon"),
        (example("The DOG bit the cat, so it hid.", "cat", "DOG", "it"), "lexicon"),
        (example("Maria fed the cat because she was kind.", "Maria", "cat", "she"), "unseen"),
        (example("The cat saw the dragon, and it roared.", "dragon", "cat", "it"), "unseen"),
        (
            example("The old dog met the cat dealer, so he smiled.", "cat dealer", "dog", "he"),
            "unseen",
        ),
    ],
)
def test_a_sentence_is_the_lexicons_only_where_every_candidate_is_a_lexicon_noun(sentence, group):
    # A plural and a capital are the lexicon's nouns as written; a name, a noun it lacks and a
    # noun of two words are not.
    assert lexicon_group(sentence) == group


def test_191_natural_sentences_have_only_lexicon_nouns_and_41_one_it_lacks():
    assert Counter(lexicon_group(ex) for ex in natural()) == {"lexicon": 191, "unseen": 41}


@pytest.fixture(scope="module")
def natural_study(tmp_path_factory):
    """(model, tokenizer, its `--probe natural` study without the causal tests)."""
    model, tokenizer = make_run(tmp_path_factory.mktemp("run"), "bpe", 64)
    return model, tokenizer, study(model, tokenizer, NATURAL, permutations=5, parts=())


def test_each_groups_numbers_are_the_whole_sets_on_its_sentences(natural_study):
    model, tokenizer, result = natural_study
    # The whole set read once, then each number taken over a group's sentences alone.
    picks, kept = answers(model, tokenizer, natural())
    scores = candidate_scores(model, tokenizer, kept)
    best = result["best_head"]
    hits = {m: picks[m] == scores.label for m in METHODS}
    hits["head"] = winners(scores)[:, best["layer"], best["head"]] == scores.label
    groups = [lexicon_group(ex) for ex in kept]
    split = result["by_lexicon"]
    assert list(split) == ["lexicon", "unseen"]
    for group, row in split.items():
        mine = [g == group for g in groups]
        assert row["examples"] == sum(mine)
        for name, hit in hits.items():
            assert row["cand_at_1"][name] == pytest.approx(hit[mine].double().mean().item())
    whole = result["model_answer"]["all"]
    assert sum(row["examples"] for row in split.values()) == whole["examples"] == len(natural())
    assert split["lexicon"]["examples"] == 191
    assert mismatches(result, Study) == []  # "by_lexicon" is of its type


def test_the_split_is_the_natural_sets_alone(natural_study):
    model, tokenizer, _ = natural_study
    builtin = study(model, tokenizer, "", permutations=5, parts=())
    assert "by_lexicon" not in builtin  # every generated candidate is a lexicon noun


def test_the_report_and_the_page_give_each_groups_count_and_numbers(natural_study):
    _, _, result = natural_study
    report = study_report(result)
    page = probe_section({**result, "natural": result})
    for group, row in result["by_lexicon"].items():
        line = next(s for s in report.splitlines() if s.startswith(f"  {group} "))
        said = [f"{row['cand_at_1'][name]:.1%}" for name in (*METHODS, "head")]
        assert line.split()[1] == str(row["examples"]) and all(n in line for n in said)
        assert f"<th>{group} ({row['examples']})</th>" in page
    assert report.index("The model's own answer") < report.index("By the training lexicon")
