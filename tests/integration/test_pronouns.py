"""The pronoun language: its lexicon, its labels, its held-out splits, and the hand-written natural
set; and the JSONL format the probe reads."""

import functools
import json
import os
import random
import re
import subprocess
import sys

import pytest

from data.pronouns import (
    ATTENTION_EXAMPLES,
    PRONOUNS,
    Example,
    corpus_text,
    examples,
    iter_examples,
    natural,
    read_jsonl,
    split_of,
    validate_example,
    write_jsonl,
)
from data.pronouns.corpus import DEFAULT_CORPUS_BYTES, PROSE_LINES
from data.pronouns.lexicon import AGENTS, KINDS, PRONOUN_WORDS, lexicon
from data.pronouns.shapes import CONNECTIVES, SHAPES
from tests.helpers import ROOT

WORD = re.compile(r"[A-Za-z]+")
LEX = lexicon()
NOUN_OF = {
    **{n.word: (n, False) for n in LEX.nouns},
    **{n.plural: (n, True) for n in LEX.nouns if n.plural},
}


@pytest.fixture(scope="module")
def default_corpus():
    return corpus_text()


@pytest.fixture(scope="module")
def labelled():
    return {split: examples(split) for split in ("train", "dev", "test")}


def span_text(example, span):
    return example.text[span[0] : span[1]]


def pronoun_words(text):
    return [w for w in WORD.findall(text) if w.lower() in PRONOUN_WORDS]


def test_corpus_is_deterministic_in_seed():
    assert corpus_text(seed=0, n_bytes=20_000) == corpus_text(seed=0, n_bytes=20_000)
    assert corpus_text(seed=0, n_bytes=20_000) != corpus_text(seed=1, n_bytes=20_000)
    assert examples("dev", seed=3, n=50) == examples("dev", seed=3, n=50)
    assert examples("dev", seed=3, n=50) != examples("dev", seed=4, n=50)


def test_the_same_seed_gives_the_same_text_in_every_process():
    # Python randomises str hashes per process: nothing the generator draws may follow a set's
    # order.
    code = (
        "from data.pronouns import corpus_text, examples; "
        "print(corpus_text(n_bytes=3000) + examples('dev', n=20)[-1].text)"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            check=True,
        ).stdout
        for seed in (1, 2, 3)
    }
    assert len(outputs) == 1
    assert outputs.pop() == corpus_text(n_bytes=3000) + examples("dev", n=20)[-1].text + "\n"


def test_corpus_size_and_lines(default_corpus):
    # It stops at the first line that reaches the size; ASCII, one paragraph a line.
    assert DEFAULT_CORPUS_BYTES <= len(default_corpus) < DEFAULT_CORPUS_BYTES + 400
    small = corpus_text(n_bytes=5_000)
    assert 5_000 <= len(small) < 5_400
    lines = default_corpus.split("\n")
    assert lines[-1] == "" and all(lines[:-1]) and default_corpus.isascii()
    # A line holds the one labelled pronoun, or (prose) none; most hold one.
    counts = [len(pronoun_words(line)) for line in lines[:5000]]
    assert set(counts) == {0, 1}
    assert abs(counts.count(1) / len(counts) - (1 - PROSE_LINES)) < 0.03


def test_the_lexicon_is_large_and_tagged():
    assert len(LEX.words()) >= 1500
    by_kind = {k: [n for n in LEX.nouns if n.kind == k] for k in KINDS}
    assert min(len(v) for v in by_kind.values()) >= 80
    genders = [n.gender for n in by_kind["person"]]
    assert genders.count("m") >= 40 and genders.count("f") >= 40
    assert all(n.gender == "-" for k in ("animal", "thing", "place") for n in by_kind[k])
    assert all(3 <= len(n.doings) for n in LEX.nouns)
    # Only people and animals do things to other things; every verb, adjective and action fits
    # some kind.
    assert all(subject <= set(AGENTS) and subject and obj for _, subject, obj in LEX.verbs)
    assert all(kinds for _, kinds in LEX.adjectives) and all(kinds for _, kinds in LEX.actions)


# Words that start a doing only of some kinds of noun: "the kettle smiled" is the mistake.
ONLY = {
    ("person",): {
        "smiled",
        "wrote",
        "read",
        "cooked",
        "taught",
        "phoned",
        "typed",
        "prayed",
        "paid",
        "signed",
        "married",
        "apologised",
        "shaved",
        "knitted",
        "ruled",
        "marked",
    },
    ("animal",): {
        "meowed",
        "mooed",
        "neighed",
        "quacked",
        "oinked",
        "brayed",
        "bleated",
        "clucked",
        "hooted",
        "squawked",
        "wagged",
        "grazed",
    },
    ("thing", "place"): {"ticked", "leaked", "rusted", "beeped", "flickered", "boiled", "melted"},
}


def test_the_doings_fit_their_nouns():
    firsts = {n.word: {d.split()[0] for d in n.doings} for n in LEX.nouns}
    kind_of = {n.word: n.kind for n in LEX.nouns}
    for kinds, words in ONLY.items():
        wrong = [
            (noun, sorted(f & words))
            for noun, f in firsts.items()
            if f & words and kind_of[noun] not in kinds
        ]
        assert wrong == [], f"{kinds}-only doings elsewhere: {wrong[:5]}"
    assert {"wrote", "hooted", "ticked"} <= {w for f in firsts.values() for w in f}  # it bites


def check_label(ex):
    pronoun = span_text(ex, ex.pronoun).lower()
    antecedent, plural = NOUN_OF[span_text(ex, ex.antecedent).lower()]
    assert pronoun in PRONOUNS and antecedent.pronoun(plural) == pronoun, ex.text
    # One of THIS antecedent's doings follows the pronoun (was -> were after a plural).
    after = ex.text[ex.pronoun[1] + 1 :]
    doings = [
        ("were " + d[4:]) if plural and d.startswith("was ") else d for d in antecedent.doings
    ]
    assert any(after.startswith(d) for d in doings), ex.text
    # Every candidate precedes the pronoun; every noun before it is a candidate.
    candidates = [ex.antecedent, *ex.distractors]
    assert all(span[1] < ex.pronoun[0] for span in candidates)
    nouns_before = [
        m.span() for m in WORD.finditer(ex.text[: ex.pronoun[0]]) if m.group().lower() in NOUN_OF
    ]
    assert sorted(nouns_before) == sorted(candidates), ex.text
    assert pronoun_words(ex.text) == [span_text(ex, ex.pronoun)], ex.text


def agrees(ex, span):
    noun, plural = NOUN_OF[span_text(ex, span).lower()]
    return noun.pronoun(plural) == span_text(ex, ex.pronoun).lower()


def test_every_label_is_correct(labelled):
    for split_examples in labelled.values():
        for ex in split_examples:
            check_label(ex)


def test_agreement_role_or_meaning_decides(labelled):
    # Where another candidate agrees with the pronoun, only its role or the meaning of the words
    # before the pronoun can decide: such examples exist, from role and meaning shapes.
    not_agreement = [ex for ex in labelled["test"] if any(agrees(ex, d) for d in ex.distractors)]
    assert len(not_agreement) >= 40
    kinds = {n.word: n.kind for n in LEX.nouns}
    stream = iter_examples("test", random.Random(0))
    for ex, combination in (next(stream) for _ in range(1000)):
        shape = next(s for s in SHAPES if s.name == combination.split("|")[0])
        if shape.meaning:  # all agree; a description fits the antecedent's kind alone
            ante = combination.split("|")[1]
            others = combination.split("|")[2].split("+")
            assert all(agrees(ex, d) for d in ex.distractors), ex.text
            before = ex.text[: ex.pronoun[0]].lower()
            other_kinds = {kinds[o] for o in others}
            assert any(
                kinds[ante] in fit and not fit & other_kinds and re.search(rf"\b{phrase}\b", before)
                for phrase, fit in LEX.adjectives + LEX.descriptions
            ), ex.text
        elif shape.role is None:  # agreement: nobody else takes this pronoun
            assert not any(agrees(ex, d) for d in ex.distractors), ex.text
        # Each example says what decides: agreement wherever it suffices, else its shape's kind.
        if not any(agrees(ex, d) for d in ex.distractors):
            assert ex.decided_by == "agreement", ex.text
        else:
            assert ex.decided_by == ("meaning" if shape.meaning else "role"), ex.text
    # Every kind is in the test split, role shapes' examples that agreement decides among them.
    assert {ex.decided_by for ex in labelled["test"]} == {"agreement", "role", "meaning"}


def position_rates(exs):
    """Each position-only rule's hit rate: first, nearest, i-th from the left or the right."""
    rates = {}
    for side in ("left", "right"):
        for i in range(3):
            hits = 0
            for ex in exs:
                spans = sorted([ex.antecedent, *ex.distractors])
                spans = spans if side == "left" else spans[::-1]
                hits += i < len(spans) and spans[i] == ex.antecedent
            rates[f"{side} {i + 1}"] = hits / len(exs)
    return rates


@pytest.mark.parametrize("split", ["dev", "test"])
def test_no_positional_shortcut(labelled, split):
    exs = labelled[split]
    assert len(exs) == 300 and len({ex.text for ex in exs}) == 300
    rates = position_rates(exs)  # "left 1" is "first", "right 1" is "nearest"
    assert max(rates.values()) <= 0.60, rates
    assert any(len(ex.distractors) == 2 for ex in exs)  # 3-candidate shapes occur


def test_splits_hold_out_combinations(default_corpus, labelled):
    combos = {}
    for split in ("train", "dev", "test"):
        stream = iter_examples(split, random.Random(f"test:{split}"))
        combos[split] = {combo for _, (_, combo) in zip(range(6000), stream)}
        assert all(split_of(c) == split for c in combos[split])
    assert not combos["train"] & combos["dev"]
    assert not combos["train"] & combos["test"]
    assert not combos["dev"] & combos["test"]
    assert len(SHAPES) >= 40
    assert {c.split("|")[0] for c in combos["test"]} == {s.name for s in SHAPES}  # all reach test
    for split in ("dev", "test"):  # and so no held-out example is in the training text
        assert not any(ex.text in default_corpus for ex in labelled[split])


def test_natural_set_is_labelled_as_its_format_says():
    exs = natural()
    assert len(exs) >= 200 and len({ex.text for ex in exs}) == len(exs)
    for ex in exs:  # read_jsonl already validated the spans; the meaning is checked here
        assert pronoun_words(ex.text) == [span_text(ex, ex.pronoun)], (
            ex.text
        )  # one pronoun, no other
        for span in [ex.antecedent, *ex.distractors]:
            assert re.fullmatch(r"[A-Za-z]+", span_text(ex, span)), ex.text  # a whole word
            assert (
                not ex.text[span[1] : span[1] + 1].isalpha()
                and not ex.text[span[0] - 1 : span[0]].isalpha()
            )
            assert span[1] <= ex.pronoun[0]
    pronouns = [span_text(ex, ex.pronoun).lower() for ex in exs]
    assert all(pronouns.count(p) >= 0.15 * len(exs) for p in PRONOUNS)
    assert sum(len(ex.distractors) >= 2 for ex in exs) >= 0.3 * len(exs)  # three candidates


def test_each_natural_sentence_says_whether_agreement_decides_and_the_lexicon_agrees():
    # Tagged by hand; where the lexicon knows every distractor it must find the same: agreement
    # exactly where no distractor takes the pronoun. Role is a distinction only the generator draws.
    exs = natural()
    assert all(ex.decided_by in ("agreement", "meaning") for ex in exs)
    known = [ex for ex in exs if all(span_text(ex, d).lower() in NOUN_OF for d in ex.distractors)]
    assert len(known) >= 0.8 * len(exs)
    for ex in known:
        assert (ex.decided_by == "agreement") == (not any(agrees(ex, d) for d in ex.distractors)), (
            ex.text
        )
    assert sum(ex.decided_by == "meaning" for ex in exs) >= 0.25 * len(exs)


def test_natural_set_has_no_positional_shortcut():
    rates = position_rates(natural())
    assert max(rates.values()) <= 0.60, rates


def test_the_natural_set_is_never_trained_on(default_corpus):
    corpus = default_corpus
    assert not any(ex.text in corpus for ex in natural())


def test_jsonl_round_trip(tmp_path, labelled):
    path = tmp_path / "dev.jsonl"
    write_jsonl(labelled["dev"], path)
    assert read_jsonl(path) == labelled["dev"]
    first = json.loads(path.read_text().splitlines()[0])
    assert set(first) == {"text", "pronoun", "antecedent", "distractors", "decided_by"}
    assert first["pronoun"] == list(labelled["dev"][0].pronoun)


GOOD = {
    "text": "The king saw the bell because it rang.",
    "pronoun": [30, 32],
    "antecedent": [17, 21],
    "distractors": [[4, 8]],
}


@pytest.mark.parametrize(
    "bad_line, names",
    [
        ("{not json", ("not valid JSON",)),
        (
            json.dumps({k: v for k, v in GOOD.items() if k != "antecedent"}),
            ('"antecedent"', "missing"),
        ),
        (json.dumps({**GOOD, "pronoun": [30, 99]}), ('"pronoun"', "[30, 99]", "outside")),
        (json.dumps({**GOOD, "pronoun": [-1, 2]}), ('"pronoun"', "[-1, 2]", "outside")),
        (json.dumps({**GOOD, "antecedent": [17, 17]}), ('"antecedent"', "empty")),
        (json.dumps({**GOOD, "distractors": []}), ('"distractors"', "at least one")),
        (
            json.dumps({**GOOD, "distractors": [[18, 25]]}),
            ('"antecedent"', '"distractors[0]"', "overlap"),
        ),
        (json.dumps({**GOOD, "pronoun": [30.0, 32]}), ('"pronoun"', "[30.0, 32]", "integers")),
        (
            json.dumps({**GOOD, "decided_by": "syntax"}),
            ('"decided_by"', "'syntax'", "agreement, role, meaning"),
        ),
        (json.dumps({**GOOD, "distractors": [4, 8]}), ("[start, end] lists",)),
        # A causal model at the pronoun sees nothing after it: such a candidate cannot be scored.
        (
            json.dumps({**GOOD, "distractors": [[4, 8], [33, 37]]}),
            ('"distractors[1]" [33, 37]', "after", "[30, 32]"),
        ),
        (json.dumps({**GOOD, "antecedent": [33, 37]}), ('"antecedent" [33, 37]', "after")),
        # The pronoun is exactly one word: not part of one, not two, not with its space.
        (json.dumps({**GOOD, "pronoun": [30, 31]}), ("[30, 31]", "'i'", "whole word")),
        (json.dumps({**GOOD, "pronoun": [30, 37]}), ("[30, 37]", "'it rang'", "whole word")),
        (json.dumps({**GOOD, "pronoun": [29, 32]}), ("[29, 32]", "' it'", "whole word")),
        (
            json.dumps({**GOOD, "text": "The king saw the bell, then hit.", "pronoun": [29, 31]}),
            ("[29, 31]", "'it'", "whole word"),
        ),  # the "it" of "hit"
        # Candidates are whole words too: not "in" of "king", not "el" of "bell".
        (
            json.dumps({**GOOD, "distractors": [[5, 7]]}),
            ('"distractors[0]" [5, 7]', "'in'", "whole"),
        ),
        (json.dumps({**GOOD, "antecedent": [18, 20]}), ('"antecedent" [18, 20]', "'el'", "whole")),
        (json.dumps({**GOOD, "antecedent": [16, 21]}), ('"antecedent" [16, 21]', "' bell'")),
        # A key the format does not know is refused, a misspelt one with the key it resembles.
        (
            json.dumps({**GOOD, "antecendent": [17, 21]}),
            ('unknown key "antecendent"', 'did you mean "antecedent"?'),
        ),
        (json.dumps({**GOOD, "colour": "red"}), ('unknown key "colour"', "decided_by")),
    ],
)
def test_read_jsonl_errors_name_file_and_line(tmp_path, bad_line, names):
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + bad_line + "\n")
    with pytest.raises(ValueError) as err:
        read_jsonl(path)
    assert all(name in str(err.value) for name in (f"{path}, line 2", *names)), err.value


def test_read_jsonl_names_a_file_that_is_not_utf8(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n" + "caf\u00e9".encode("latin-1") + b"\n")
    with pytest.raises(ValueError, match=f"{re.escape(str(path))}.*UTF-8"):
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
    # The probe's report notes it (tests/unit/test_probe.py); refusing it would stop --word studies.
    path = tmp_path / "mine.jsonl"
    path.write_text(
        json.dumps({**GOOD, "pronoun": [22, 29]})
        + "\n"  # "because"
        + json.dumps({**GOOD, "text": "The king saw the bell because It rang."})
        + "\n"
    )
    assert [span_text(ex, ex.pronoun) for ex in read_jsonl(path)] == ["because", "It"]


def test_read_jsonl_accepts_a_hand_written_file(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n")
    [ex] = read_jsonl(path)
    assert (span_text(ex, ex.pronoun), span_text(ex, ex.antecedent)) == ("it", "bell")
    assert ex == Example(GOOD["text"], (30, 32), (17, 21), [(4, 8)]) and ex.decided_by is None
    write_jsonl(
        [ex], tmp_path / "back.jsonl"
    )  # a file that did not say what decides still does not
    assert json.loads((tmp_path / "back.jsonl").read_text()) == GOOD
    with pytest.raises(FileNotFoundError):
        read_jsonl(tmp_path / "missing.jsonl")


def test_user_mistakes_raise_value_error():
    with pytest.raises(ValueError, match="unknown split 'valid'"):
        examples("valid")
    with pytest.raises(ValueError, match="n_bytes"):
        corpus_text(n_bytes=0)
    with pytest.raises(ValueError, match="^n .*positive integer"):
        examples("dev", n=0)


def shape_regex(shape, loose=False):
    """A regex for the sentences `shape` makes from the lexicon's words. loose: any lower-case
    word where the regex takes an adjective or a noun (every one of them is one), a regex that
    matches every sentence the exact one matches and compiles fast (the exact one's thousands of
    nouns in each noun phrase take a tenth of a second a phrase)."""
    adjectives = "|".join(a for a, _ in LEX.adjectives)
    nouns = "|".join(sorted(NOUN_OF, key=len, reverse=True))
    if loose:
        assert re.fullmatch(r"[a-z]+(?:\|[a-z]+)*", f"{adjectives}|{nouns}")
        adjectives = nouns = "[a-z]+"
    phrase = f"(?:(?:the|a|an) )?(?:(?:{adjectives}) )?(?:{nouns})"
    alternatives = {
        "v": "|".join(v for v, _, _ in LEX.verbs),
        "act": "|".join(a for a, _ in LEX.actions),
        "be": "was|were",
        "adj": "|".join(a for a, _ in LEX.adjectives),
        "desc": "|".join(d for d, _ in LEX.descriptions),
        "pro": "|".join(PRONOUNS),
        "conj": "|".join(CONNECTIVES),
        "time": "|".join(LEX.times),
        "cont": ".+",
    }

    def field(m):
        name = m[1]
        if name.isdigit():
            return f"(?:{phrase})"
        return f"(?:{alternatives[name.rstrip('0123456789AB')]})"

    parts = re.split(r"(\{\w+\})", shape.pattern)
    body = "".join(
        re.sub(r"\{(\w+)\}", field, p) if p.startswith("{") else re.escape(p) for p in parts
    )
    return re.compile(body, re.IGNORECASE)


def test_attention_examples_are_sentences_of_the_language():
    assert ATTENTION_EXAMPLES[0] == (
        "The animal in the jungle went out on a hunt because it was hungry."
    )
    pronouns = {w for s in ATTENTION_EXAMPLES for w in WORD.findall(s) if w in PRONOUNS}
    assert pronouns == set(PRONOUNS)
    exact = functools.cache(lambda i: shape_regex(SHAPES[i]))
    loose = [shape_regex(s, loose=True) for s in SHAPES]
    for sentence in ATTENTION_EXAMPLES:
        # The exact regex of each shape the loose one lets through: no other can match.
        candidates = [i for i, r in enumerate(loose) if r.fullmatch(sentence)]
        assert any(exact(i).fullmatch(sentence) for i in candidates), sentence
    assert not exact(0).fullmatch("The kettle sang a song and then it slept.")  # the check bites
