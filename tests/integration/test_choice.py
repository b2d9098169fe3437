"""Choice twins and the choice circuit: twins keep every candidate and flip the answer by what
decides; a twin that is not token-aligned is refused; on a hand-built model whose choice one known
head makes, flipping the cue flips the metric's sign, that head is the one that decides, and the
circuit runs through its query; the study's JSON has the keys the page and users read."""

import html
import json
import re

import pytest

from analysis.choice import choice_accuracy, choice_study, deciding
from analysis.choice_metric import choice_metrics, head_inputs
from analysis.choice_pairs import NotTokenAligned, choice_pair, choice_pairs
from analysis.circuit import circuit_of_pairs
from analysis.patching import patching_of_pairs
from data.pronouns import Example, examples, read_jsonl, write_jsonl
from data.pronouns.choice_twins import REASONS, choice_twins
from data.pronouns.lexicon import lexicon
from data.tokenizer import train_tokenizer
from model.gpt import GPT, GPTConfig
from tests.helpers import RUN_TEXT, make_run


def _example(text, pronoun, antecedent, others, kind):
    """An Example from words: the n-th occurrence of each word is given as (word, n)."""

    def span(word, n=0):
        return [m.span() for m in re.finditer(rf"\b{word}\b", text)][n]

    return Example(text, span(*pronoun), span(*antecedent), [span(*o) for o in others], kind)


def test_agreement_twin_flips_the_pronoun_to_the_other_candidates():
    ex = _example(
        "The doorman called out to the seals. They flopped into the sea.",
        ("They",),
        ("seals",),
        [("doorman",)],
        "agreement",
    )
    (first, *_), why = choice_twins(ex)
    twin = first.twin
    assert why is None and twin.text.startswith("The doorman called out to the seals. He ")
    assert (
        twin.text[slice(*twin.antecedent)] == "doorman" and twin.text[slice(*twin.pronoun)] == "He"
    )
    doorman = next(n for n in lexicon().nouns if n.word == "doorman")
    assert twin.text[twin.pronoun[1] :].strip(" .") in doorman.doings  # B's own doing follows


def test_role_twin_exchanges_the_candidates_and_meaning_twin_the_describing_words():
    role = _example(
        "Beside the grandfather, the man shouted and then he knotted a tie.",
        ("he",),
        ("man",),
        [("grandfather",)],
        "role",
    )
    (first, *_), _ = choice_twins(role)
    twin = first.twin
    assert twin.text.startswith("Beside the man, the grandfather shouted and then he ")
    assert twin.text[slice(*twin.antecedent)] == "grandfather"  # now in the subject's slot
    meaning = _example(
        "The lovely turtle kept away from the silver flower. Busy and greedy, it swam out to sea.",
        ("it",),
        ("turtle",),
        [("flower",)],
        "meaning",
    )
    tries, why = choice_twins(meaning)
    assert why is None and tries
    fits = {a: kinds for a, kinds in lexicon().adjectives}
    for t in tries:
        prefix = t.twin.text[: t.twin.pronoun[0]]
        assert prefix.startswith("The lovely turtle kept away from the silver flower. ")
        words = prefix.split(". ")[1].rstrip(", ").lower().split(" and ")
        assert len(words) == 2 and all(
            fits[w] == frozenset({"thing"}) or ("thing" in fits[w] and "animal" not in fits[w])
            for w in words
        )
        assert t.twin.text[slice(*t.twin.antecedent)] == "flower"


def test_an_example_without_a_twin_says_why():
    ex = _example(
        "The panda kept away from the paramedic. The next day it tumbled down the slope.",
        ("it",),
        ("panda",),
        [("paramedic",)],
        "agreement",
    )
    assert choice_twins(ex) == ([], "no other pronoun")  # a paramedic takes no sure pronoun
    ex = _example("Zorg met the dog, and it barked.", ("it",), ("dog",), [("Zorg",)], "agreement")
    assert choice_twins(ex) == ([], "unknown noun")
    assert set(REASONS) >= {"no other pronoun", "unknown noun"}


@pytest.fixture(scope="module")
def bpe():
    text = RUN_TEXT + "\n".join(ex.text for ex in examples("dev") + examples("test"))
    return train_tokenizer("bpe", text, 600)


def test_a_twin_that_is_not_token_aligned_is_refused(tmp_path, bpe):
    text, other = "The king fed the dog, so it barked.", "The king fed the dog, so they ran."
    line = {
        "text": text,
        "pronoun": [25, 27],
        "antecedent": [17, 20],
        "distractors": [[4, 8]],
        "twin": {"text": other, "pronoun": [25, 29], "antecedent": [4, 8]},
    }
    path = tmp_path / "own.jsonl"
    path.write_text(json.dumps(line) + "\n")
    (ex,) = read_jsonl(path)
    write_jsonl([ex], tmp_path / "again.jsonl")
    assert read_jsonl(tmp_path / "again.jsonl") == [ex]  # the twin survives a round trip
    char = train_tokenizer("char", text + other, None)  # "it" is 2 tokens, "they" 4
    with pytest.raises(NotTokenAligned):
        choice_pair(char, ex, 64)
    made = choice_pairs(char, [ex], 64)
    assert made.pairs == [] and made.skipped == {"not aligned": 1}
    pair = choice_pair(bpe, ex, 64)  # one word token each under the BPE: aligned
    assert len(pair.clean) == len(pair.corrupt) and pair.antecedent == [len(pair.clean) - 1]
    assert pair.clean_next != pair.corrupt_next


@pytest.mark.parametrize(
    "twin, says",
    [
        ({"text": "x"}, "exactly the keys"),
        (
            {"text": "The king fed the dog, so he", "pronoun": [25, 27], "antecedent": [4, 8]},
            "ends",
        ),
        (
            {
                "text": "The king fed the dog, so it barked.",
                "pronoun": [25, 27],
                "antecedent": [4, 8],
            },
            "the same",
        ),
        (
            {"text": "The king fed the dog, so he ran.", "pronoun": [25, 40], "antecedent": [4, 8]},
            "outside",
        ),
    ],
)
def test_a_bad_twin_in_a_users_file_is_a_one_line_error(tmp_path, twin, says):
    line = {
        "text": "The king fed the dog, so it barked.",
        "pronoun": [25, 27],
        "antecedent": [17, 20],
        "distractors": [[4, 8]],
        "twin": twin,
    }
    path = tmp_path / "own.jsonl"
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(ValueError, match=says) as e:
        read_jsonl(path)
    assert "line 1" in str(e.value) and "\n" not in str(e.value)


def test_flipping_the_cue_flips_the_metric_and_the_known_head_decides(choice_model):
    model, pairs = choice_model
    clean, twin, heads = choice_metrics(model, pairs)
    assert (clean > 4).all() and (twin < -4).all()  # the pronoun alone decides which
    found = deciding(heads, clean, twin)
    assert found["deciding"] == ["L0H1"] and found["right"] == len(pairs)
    assert found["flip_share"][0][1] == 1.0 and found["flip_share"][0][0] == 0.0
    (through,) = head_inputs(model, pairs, ["L0H1"])  # (3, 2, N): q, k, v, both ways
    assert (through[0, 0] < 0).all() and (through[0, 1] > 0).all()  # the query decides
    assert (through[1:, 0] > 0).all() and (through[1:, 1] < 0).all()  # key, value: no flip
    accuracy = choice_accuracy(clean, twin, seed=0, resamples=100)
    assert accuracy["accuracy"] == 1.0 and accuracy["flip"] == 1.0 and accuracy["prefers"]
    swapped = [p._replace(clean_next=7, corrupt_next=6) for p in pairs]  # the other answer
    clean, twin, _ = choice_metrics(model, swapped)
    assert (clean < 0).all() and choice_accuracy(clean, twin, 0, 100)["accuracy"] == 0.0
    heads = patching_of_pairs(model, pairs, resamples=100)[
        "heads"
    ]  # the sentence's run into the twin's
    assert heads[0][1]["recovered"] == pytest.approx(1.0)
    assert all(abs(c["recovered"]) < 1e-9 for row in heads for c in row if c is not heads[0][1])
    circuit = circuit_of_pairs(model, pairs, [None] * len(pairs), resamples=100, faithful=0.8)
    kept = {(e["from"], e["to"]) for e in circuit["edges"] if e["in_circuit"]}
    assert ("embed:antecedent", "L0H1.q") in kept and ("L0H1", "logits") in kept
    assert all("L0H0" not in e and "L1" not in e for edge in kept for e in edge)


def test_the_choice_object_has_the_keys_of_the_issue(tmp_path):
    from analysis.choice import with_shared

    model, tokenizer = make_run(tmp_path / "run", "bpe", 64)
    result = {"circuit": {"edges": [], "by_kind": {}}}  # an identity circuit with no edges
    with_shared(result, model, tokenizer, examples("test")[:100], patch=True)
    choice = result["choice"]
    assert choice["patching"]["columns"] == ["changed", "between", "pronoun"]
    assert choice["patching"]["n"] == choice["n"]
    keys = {"n", "accuracy", "flip", "circuit"}
    assert keys <= set(choice) and set(choice["by_kind"]) == {"agreement", "role", "meaning"}
    for part in [choice, *choice["by_kind"].values()]:
        assert keys <= set(part) and {"edges", "faithfulness"} <= set(part["circuit"])
        assert isinstance(part["circuit"]["edges"], list) and part["shared_edges"] == []
        if not part["prefers"]:  # no preference: no circuit drawn
            assert part["circuit"]["edges"] == [] and part["circuit"]["faithfulness"] is None
    twins = choice["twins"]
    assert sum(twins["found"].values()) == choice["n"]
    assert choice["n"] + sum(twins["skipped"].values()) == sum(twins["tried"].values()) == 100


def test_choice_study_on_examples_without_twins_is_nothing_to_measure(bpe):
    from analysis.errors import NothingToMeasure

    cfg = GPTConfig(vocab_size=bpe.vocab_size, block_size=64, n_layer=1, n_head=1, n_embd=16)
    ex = Example("Zorg met the dog, and it barked.", (22, 24), (12, 15), [(0, 4)], "agreement")
    with pytest.raises(NothingToMeasure) as e:
        choice_study(GPT(cfg).eval(), bpe, [ex])
    assert e.value.analysis == "choice"


def test_the_page_draws_each_circuit_once_and_says_why_a_set_has_none():
    from reports.page_writer import render_html
    from tests.helpers import SENTENCES

    edge = {"from": "embed:changed", "to": "L0H2.q", "share": 0.42, "in_circuit": True}
    drawn = {"drawn": True, "size": 1, "faithfulness": 0.91, "edges": [edge], "gap": 5.0}
    none = {"drawn": False, "size": None, "faithfulness": None, "edges": [], "gap": 0.31}

    def part(accuracy, prefers, circuit, right, shared=("L0H2 -> MLP0",), flip=0.8):
        return {
            "n": 30,
            "accuracy": accuracy,
            "accuracy_ci": [accuracy - 0.1, accuracy + 0.07],
            "flip": flip,
            "flip_ci": [flip - 0.1, flip + 0.1],
            "clean_cm": 3.0,
            "twin_cm": -2.0,
            "prefers": prefers,
            "deciding": ["L0H2"] if right >= 20 else [],
            "right": right,
            "circuit": circuit,
            "shared_edges": list(shared),
        }

    choice = {
        **part(0.9, True, drawn, 25),
        "by_kind": {
            "role": part(0.5, False, none, 3, (), flip=0.2),  # at chance
            "meaning": part(0.7, True, none, 1, ()),  # right, but the twins hardly move it
            "agreement": part(0.9, True, drawn, 25, ()),  # drawn, sharing no edge
        },
        "twins": {"found": {"role": 30}, "tried": {"role": 41}, "skipped": {}},
        "n_edges": 137,
        "prefers_from": 0.25,
    }
    identity_edge = {"from": "embed:antecedent", "to": "L0H2.v", "share": 0.6, "in_circuit": True}
    kind = {"edges": [identity_edge], "faithfulness": 0.96, "size": 1}
    identity = {
        "edges": [identity_edge],
        "faithfulness": 0.97,
        "size": 1,
        "n_edges": 137,
        "by_kind": {"role": kind, "meaning": kind, "agreement": kind},
    }
    page = render_html(SENTENCES, {"best_head": (0, 2), "circuit": identity, "choice": choice})
    section = page[page.index('<section class="circuit choice">') :]
    section = section[: section.index("</section>")]
    text = html.unescape(re.sub(r"<[^>]+>", " ", section))
    # Each identity circuit is drawn once, in its own section; here the choice circuits alone.
    # Each identity graph also has its edges in words, and a label a screen reader says.
    assert page.count("<li>embed:antecedent → L0H2.v: 60%</li>") == 4
    assert page.count("embed:antecedent") == 2 * 4 and "embed:antecedent" not in section
    assert 'role="img" aria-label="all sentences: a graph of 1 edge from' in page
    assert section.count("<svg") == 2 and "(left)" not in section
    assert "all sentences: 1 of 137 edges keep 91.0% of the choice gap" in text
    # Each reason, and the model's own answer, defined in the page's Terms.
    terms = html.unescape(page[page.index('<section class="terms">') :])
    for word in ("reason", "agreement", "role", "meaning", "answer (the model's own)"):
        assert f"<dt>{word}</dt>" in terms, word
    # A set without a choice circuit says why in its own numbers, and no line contradicts it.
    assert "role: no choice circuit: flip 20.0% [10.0, 30.0] is not above chance (25%)" in text
    assert "meaning: no choice circuit: the model picks the antecedent in 70.0%" in text
    assert "by 0.31 on average" in text and "under the 0.5 a circuit needs" in text
    assert "no preference" not in page and "shows no preference" not in page
    # Shared edges only where both circuits exist.
    assert "all sentences, shared with its identity circuit: L0H2 -> MLP0" in text
    assert "agreement: no edge shared with its identity circuit" in text
    assert "role, " not in text and "meaning, " not in text and "shared: none" not in text
    assert "too few right both ways (3)" in text and "30/41" in text
    assert render_html(SENTENCES, {"best_head": (0, 2)}).count("circuit choice") == 0
    from reports.choice_page import choice_section

    answer = {"all": {"cand_at_1": {"substitution": 0.893}}, "decided_by": {}}
    section = choice_section(choice, identity, {"model_answer": answer})
    assert ">89.3%</td>" in section and section.count("<td>-</td>") == 2 * 3  # kinds: none given
    # Each reason in plain words: what decides only where the circuit is drawn; the model's own
    # answer on role (92.7%) against a choice that does not follow role, reconciled.
    answer["decided_by"] = {"role": {"cand_at_1": {"substitution": 0.927}}}
    section = choice_section(choice, identity, {"model_answer": answer})
    said = html.unescape(section[section.index('<div class="decides">') :])
    items = dict(re.findall(r"<li>(\w+)[: (](.*?)</li>", said))
    assert "does not choose by this reason" in items["role"] and "93% of role" in items["role"]
    assert "does not choose by this reason" in items["meaning"] and "0.31" in items["meaning"]
    assert "head L0 H2 decides it" in items["agreement"] and "does not" not in items["agreement"]


def test_every_generated_twin_keeps_the_candidates_and_its_pronoun_fits_its_answer():
    from data.pronouns.lexicon import find_noun

    found, tried = {}, {}
    for ex in examples("test"):
        tried[ex.decided_by] = tried.get(ex.decided_by, 0) + 1
        tries, why = choice_twins(ex)
        assert (why is None) == bool(tries) and (why is None or why in REASONS)
        found[ex.decided_by] = found.get(ex.decided_by, 0) + bool(tries)
        words = sorted(ex.text[s:e].lower() for s, e in [ex.antecedent, *ex.distractors])
        for t in tries:
            twin = t.twin
            prefix = twin.text[: twin.pronoun[1]].lower()
            assert all(re.search(rf"\b{w}\b", prefix) for w in words)  # both candidates kept
            answer = twin.text[slice(*twin.antecedent)].lower()
            assert answer in words and answer != ex.text[slice(*ex.antecedent)].lower()
            noun, plural = find_noun(answer)
            assert twin.text[slice(*twin.pronoun)].lower() == noun.pronoun(plural)
            assert t.text[: t.pronoun[1]] == ex.text[: ex.pronoun[1]]  # the example, unchanged
    assert found["agreement"] / tried["agreement"] >= 0.9
    assert found["meaning"] / tried["meaning"] >= 0.8


def test_on_a_model_of_more_heads_than_candidates_the_estimate_picks_the_head_to_patch(
    monkeypatch, choice_model
):
    import analysis.choice_metric

    monkeypatch.setattr(analysis.choice_metric, "CANDIDATES", 1)
    model, pairs = choice_model
    clean, twin, heads = choice_metrics(model, pairs)
    found = deciding(heads, clean, twin)
    assert found["deciding"] == ["L0H1"]  # the one head patched for real is the one that decides
    assert found["flip_share"][0][1] == 1.0
    assert [found["flip_share"][l][h] for l, h in ((0, 0), (1, 0), (1, 1))] == [None] * 3
