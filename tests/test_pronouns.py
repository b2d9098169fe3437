import json
import random
import re

import pytest

from data.pronouns import (
    ATTENTION_EXAMPLES, Example, corpus_text, examples, iter_examples, read_jsonl, split_of,
    validate_example, write_jsonl,
)
from data.pronouns.words import ACTIONS, CONNECTORS, LINK_VERBS, NOUNS, PLACES, PRONOUNS, TEMPLATES

WORD = re.compile(r"[A-Za-z]+")
# The prepositions that introduce a role template's distractor, as TEMPLATES writes them.
ROLE_PREPOSITIONS = ("in", "near", "with", "beside", "from")


@pytest.fixture(scope="module")
def default_corpus():
    return corpus_text()


@pytest.fixture(scope="module")
def labelled():
    return {split: examples(split) for split in ("train", "dev", "test")}


def span_text(example, span):
    return example.text[span[0]:span[1]]


def test_corpus_is_deterministic_in_seed():
    assert corpus_text(seed=0, n_bytes=20_000) == corpus_text(seed=0, n_bytes=20_000)
    assert corpus_text(seed=0, n_bytes=20_000) != corpus_text(seed=1, n_bytes=20_000)
    assert examples("dev", seed=3, n=50) == examples("dev", seed=3, n=50)
    assert examples("dev", seed=3, n=50) != examples("dev", seed=4, n=50)


def test_corpus_size_and_lines(default_corpus):
    # It stops at the first line that reaches the size, and lines are short.
    assert 1_500_000 <= len(default_corpus) < 1_500_000 + 200
    small = corpus_text(n_bytes=5_000)
    assert 5_000 <= len(small) < 5_200
    lines = default_corpus.split("\n")
    assert lines[-1] == "" and all(lines[:-1])
    assert default_corpus.isascii()
    # One pronoun per line: the labelled one.
    for line in lines[:2000]:
        assert sum(w in PRONOUNS for w in WORD.findall(line)) == 1, line


def test_vocabulary_is_modest(default_corpus):
    assert 150 < len(set(WORD.findall(default_corpus.lower()))) < 500


def test_signatures_identify_their_noun():
    first_words = [sig.split()[0] for noun in NOUNS.values() for sig in noun.signatures]
    assert len(first_words) == len(set(first_words))
    fillers = set(LINK_VERBS) | {w for phrase in CONNECTORS + ACTIONS for w in phrase.split()}
    assert not set(first_words) & fillers
    for noun in NOUNS.values():
        sig_words = {w for sig in noun.signatures for w in sig.split()}
        assert not sig_words & (set(NOUNS) | set(PLACES) | set(PRONOUNS) | {"its", "his", "her"})


def word_before_the(ex, span):
    """The word before "the <noun>", lowercased ("" at the start of the text)."""
    words = ["", ""] + ex.text[:span[0]].lower().split()
    assert words[-1] == "the", ex.text
    return words[-2]


def check_label(ex):
    pronoun = span_text(ex, ex.pronoun)
    antecedent = span_text(ex, ex.antecedent)
    assert pronoun in PRONOUNS
    assert NOUNS[antecedent].pronoun == pronoun
    # The signature of THIS antecedent follows the pronoun immediately.
    after = ex.text[ex.pronoun[1] + 1:]
    assert any(after.startswith(sig) for sig in NOUNS[antecedent].signatures), ex.text
    # Decidable before the pronoun: every candidate precedes it, and any candidate that agrees
    # with the pronoun too is a role distractor ("in the jungle") while the antecedent is not.
    candidates = [ex.antecedent, *ex.distractors]
    assert all(span[1] < ex.pronoun[0] for span in candidates)
    for span in ex.distractors:
        word = span_text(ex, span)
        agrees = word in PLACES or NOUNS[word].pronoun == pronoun
        if agrees:
            assert word_before_the(ex, span) in ROLE_PREPOSITIONS, ex.text
            assert word_before_the(ex, ex.antecedent) not in ROLE_PREPOSITIONS, ex.text
    # Every noun before the pronoun is a labelled candidate, so no unlabelled rival exists.
    nouns_before = [m.span() for m in WORD.finditer(ex.text[:ex.pronoun[0]])
                    if m.group() in NOUNS or m.group() in PLACES]
    assert sorted(nouns_before) == sorted(candidates)


def test_every_label_is_correct(labelled):
    for split_examples in labelled.values():
        for ex in split_examples:
            check_label(ex)


def test_role_examples_need_role_not_agreement(labelled):
    # Some examples must have a distractor that agrees with the pronoun (only role decides).
    def role_only(ex):
        p = span_text(ex, ex.pronoun)
        return any(span_text(ex, d) in PLACES or NOUNS[span_text(ex, d)].pronoun == p
                   for d in ex.distractors)
    assert sum(map(role_only, labelled["test"])) >= 30


@pytest.mark.parametrize("split", ["dev", "test"])
def test_no_positional_shortcut(labelled, split):
    exs = labelled[split]
    assert len(exs) == 300 and len({ex.text for ex in exs}) == 300
    first = sum(ex.antecedent == min([ex.antecedent, *ex.distractors]) for ex in exs) / len(exs)
    nearest = sum(
        ex.antecedent == max(s for s in [ex.antecedent, *ex.distractors] if s[0] < ex.pronoun[0])
        for ex in exs
    ) / len(exs)
    assert first <= 0.60 and nearest <= 0.60, (first, nearest)
    assert any(len(ex.distractors) == 2 for ex in exs)  # 3-candidate templates occur


def test_splits_hold_out_combinations(default_corpus, labelled):
    combos = {}
    for split in ("train", "dev", "test"):
        stream = iter_examples(split, random.Random(f"test:{split}"))
        combos[split] = {combo for _, (_, combo) in zip(range(3000), stream)}
        assert all(split_of(c) == split for c in combos[split])
    assert not combos["train"] & combos["dev"]
    assert not combos["train"] & combos["test"]
    assert not combos["dev"] & combos["test"]
    # Every template reaches the held-out splits.
    assert {c.split("|")[0] for c in combos["test"]} == {t.name for t in TEMPLATES}
    train_lines = set(default_corpus.split("\n"))
    for split in ("dev", "test"):
        assert not {ex.text for ex in labelled[split]} & train_lines
    # Sanity check of the check: training examples' texts do occur in the training text.
    assert {ex.text for ex in labelled["train"]} & train_lines


def test_jsonl_round_trip(tmp_path, labelled):
    path = tmp_path / "dev.jsonl"
    write_jsonl(labelled["dev"], path)
    assert read_jsonl(path) == labelled["dev"]
    first = json.loads(path.read_text().splitlines()[0])
    assert set(first) == {"text", "pronoun", "antecedent", "distractors"}
    assert first["pronoun"] == list(labelled["dev"][0].pronoun)


GOOD = {"text": "The king saw the bell because it rang.", "pronoun": [30, 32],
        "antecedent": [17, 21], "distractors": [[4, 8]]}


@pytest.mark.parametrize("bad_line, message", [
    ("{not json", "not valid JSON"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "antecedent"}), 'missing key "antecedent"'),
    (json.dumps({**GOOD, "pronoun": [30, 99]}), "outside the text"),
    (json.dumps({**GOOD, "pronoun": [-1, 2]}), "outside the text"),
    (json.dumps({**GOOD, "antecedent": [17, 17]}), "empty"),
    (json.dumps({**GOOD, "distractors": []}), "at least one"),
    (json.dumps({**GOOD, "distractors": [[18, 25]]}), "overlap"),
    (json.dumps({**GOOD, "pronoun": [30.0, 32]}), "pair of integers"),
    (json.dumps({**GOOD, "distractors": [4, 8]}), "[start, end] lists"),
    # A causal model at the pronoun sees nothing after it: such a candidate cannot be scored.
    (json.dumps({**GOOD, "distractors": [[4, 8], [33, 37]]}),
     '"distractors[1]" [33, 37] comes after the pronoun [30, 32]'),
    (json.dumps({**GOOD, "antecedent": [33, 37]}), '"antecedent" [33, 37] comes after the pronoun'),
    # The pronoun is exactly one word: not part of one, not two, not with its space.
    (json.dumps({**GOOD, "pronoun": [30, 31]}), "covers 'i', which is not one whole word"),
    (json.dumps({**GOOD, "pronoun": [30, 37]}), "covers 'it rang', which is not one whole word"),
    (json.dumps({**GOOD, "pronoun": [29, 32]}), "covers ' it', which is not one whole word"),
    (json.dumps({**GOOD, "text": "The king saw the bell, then hit.", "pronoun": [29, 31]}),
     "covers 'it', which is not one whole word"),  # the "it" of "hit"
])
def test_read_jsonl_errors_name_file_and_line(tmp_path, bad_line, message):
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + bad_line + "\n")
    with pytest.raises(ValueError, match=re.escape(message)) as err:
        read_jsonl(path)
    assert f"{path}, line 2" in str(err.value)


def test_read_jsonl_names_a_file_that_is_not_utf8(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n" + "caf\u00e9".encode("latin-1") + b"\n")
    with pytest.raises(ValueError, match=f"{re.escape(str(path))} is not UTF-8 text"):
        read_jsonl(path)


def test_every_built_in_example_passes_validation(labelled):
    refused = []
    for split in labelled.values():
        for example in split:
            try:
                validate_example(example)
            except ValueError as e:
                refused.append((example.text, str(e)))
    assert sum(map(len, labelled.values())) > 0 and refused == []


def test_a_query_word_that_is_not_a_pronoun_is_allowed(tmp_path):
    # The probe's report notes it (tests/test_probe.py); refusing it would stop --word studies.
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({**GOOD, "pronoun": [22, 29]}) + "\n"  # "because"
                    + json.dumps({**GOOD, "text": "The king saw the bell because It rang."}) + "\n")
    assert [span_text(ex, ex.pronoun) for ex in read_jsonl(path)] == ["because", "It"]


def test_read_jsonl_accepts_a_hand_written_file(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n")
    [ex] = read_jsonl(path)
    assert (span_text(ex, ex.pronoun), span_text(ex, ex.antecedent)) == ("it", "bell")
    assert ex == Example(GOOD["text"], (30, 32), (17, 21), [(4, 8)])
    with pytest.raises(FileNotFoundError):
        read_jsonl(tmp_path / "missing.jsonl")


def test_user_mistakes_raise_value_error():
    with pytest.raises(ValueError, match="unknown split 'valid'"):
        examples("valid")
    with pytest.raises(ValueError, match="n_bytes"):
        corpus_text(n_bytes=0)
    with pytest.raises(ValueError, match="n must be a positive integer"):
        examples("dev", n=0)


def test_attention_examples():
    assert ATTENTION_EXAMPLES[0] == (
        "The animal in the jungle went out on a hunt because it was hungry.")
    pronouns = {w for s in ATTENTION_EXAMPLES for w in WORD.findall(s) if w in PRONOUNS}
    assert pronouns == set(PRONOUNS)
    # Each is an in-distribution sentence: some template, filled with known words, matches it.
    fill = {"link": "|".join(LINK_VERBS), "conj": "|".join(CONNECTORS),
            "act": "|".join(ACTIONS), "pro": "|".join(PRONOUNS), "sig": ".+"}
    nouns = "|".join([*NOUNS, *PLACES])
    patterns = [re.escape(t.pattern).replace(r"\{", "{").replace(r"\}", "}") for t in TEMPLATES]
    regexes = [re.compile(re.sub(r"\{(\w+)\}", lambda m: f"(?:{fill.get(m[1], nouns)})", p))
               for p in patterns]
    for sentence in ATTENTION_EXAMPLES:
        assert any(r.fullmatch(sentence) for r in regexes), sentence
