"""Each reason said once and never contradicted: what decides only where the choice has a
preference (the circuit's rule), otherwise that the model does not choose by it; the model's
own answer against the choice test, reconciled; plain words, neuron ids in the detail."""

import re

from reports.choice_report import format_choice
from reports.decides import decides_said, whole_words

NONE = {"drawn": False, "size": None, "faithfulness": None, "edges": [], "gap": 0.31}
NONE["gap_ci"] = [0.08, 0.56]
EDGE = {"from": "embed:changed", "to": "L1H0.k", "share": 0.6, "in_circuit": True}
DRAWN = {"drawn": True, "size": 1, "faithfulness": 0.9, "faithfulness_ci": None, "edges": [EDGE]}
DRAWN.update(gap=4.0, gap_ci=[3.0, 5.0])
MLP0 = {
    "layer": 0,
    "size": 512,
    "count": 32,
    "moved": 0.85,
    "layer_moved": 1.01,
    "enough": True,
    "neurons": [
        {"index": 417, "moved": 0.2, "writes": ["scr", " spl", " hungry", ",", " barked"]},
        {"index": 88, "moved": 0.1, "writes": [" hungry", " hooted"]},
    ],
}


def part(flip, flip_ci, circuit, deciding=(), neurons=(), prefers=True):
    return {
        "n": 60,
        "accuracy": 0.8,
        "accuracy_ci": [0.7, 0.9],
        "flip": flip,
        "flip_ci": flip_ci,
        "clean_cm": 2.0,
        "twin_cm": 1.7,
        "prefers": prefers,
        "deciding": list(deciding),
        "inputs": {h: {"q": 0.1, "k": 0.9, "v": 0.0} for h in deciding},
        "right": 40,
        "flip_share": [[0.0, 0.0], [0.9, 0.0]],
        "circuit": circuit,
        "neurons": list(neurons),
    }


def choice():
    """The issue's run: meaning's flip at chance (3%) with neurons found under the old rule,
    role's choice not following role while its answer is 92.7%, agreement decided."""
    by_kind = {
        "agreement": part(0.8, [0.7, 0.9], DRAWN, ["L1H0"], [MLP0]),
        "role": part(0.38, [0.2, 0.5], NONE, prefers=False),
        "meaning": part(0.03, [0.0, 0.08], NONE, neurons=[MLP0]),
    }
    return {
        **part(0.5, [0.4, 0.6], DRAWN),
        "by_kind": by_kind,
        "twins": {"found": {"role": 60}, "tried": {"role": 60}, "skipped": {}},
        "decides_from": 0.5,
        "prefers_from": 0.25,
        "threshold": 0.8,
        "n_edges": 40,
    }


def answer(**by_reason):
    row = lambda x: {"cand_at_1": {"substitution": x}}  # noqa: E731
    return {"all": row(0.9), "decided_by": {k: row(v) for k, v in by_reason.items()}}


def reasons(text):
    """{reason: its sentence} from the report's "Each reason, in plain words" lines."""
    block = text.split("Each reason, in plain words:\n")[1].split("\n\n")[0]
    return dict(re.findall(r"^  (\w+)[: (](.*)$", block, re.M))


def test_a_reason_at_chance_gets_no_mechanism_and_one_sentence_with_its_numbers():
    said = reasons(format_choice(choice(), answer(meaning=0.5)))
    meaning = said["meaning"]
    assert "does not choose by this reason" in meaning and "3.0% [0.0, 8.0]" in meaning
    assert "0.31" in meaning and "MLP" not in meaning and "neuron" not in meaning
    assert "does not choose" not in said["agreement"]


def test_the_deciding_head_what_it_reads_and_whole_words_not_neuron_ids():
    said = reasons(format_choice(choice(), answer()))["agreement"]
    assert "head L1 H0 decides it" in said and "the candidates (its keys)" in said
    assert "layer 0 carries 101% of the choice" in said
    assert "'hungry'" in said and "'barked'" in said and "'hooted'" in said
    assert "scr" not in said and "spl" not in said and "417" not in said


def test_the_answer_and_the_choice_disagreeing_say_what_each_measures():
    role = reasons(format_choice(choice(), answer(role=0.927)))["role"]
    assert "93% of role stories" in role and "changes only the reason" in role
    agree = reasons(format_choice(choice(), answer(role=0.4)))["role"]
    assert "stories" not in agree  # both say no: nothing to reconcile


def test_neuron_ids_and_word_pieces_are_in_the_detail():
    text = format_choice(choice(), answer())
    detail = text.split("Each reason, in plain words:")[1]
    assert "neuron  417" in detail and "'scr'" in detail and "'␣spl'" in detail


def test_whole_words_keep_words_of_the_lexicon_with_their_space():
    assert whole_words(["scr", " spl", " hungry", "hungry", " the", ","]) == ["hungry", "the"]


def test_a_reason_whose_choice_follows_it_but_no_part_carries_it_says_so():
    bare = part(0.8, [0.7, 0.9], DRAWN)
    said = decides_said("role", bare)
    assert "the choice follows this reason" in said and "does not choose" not in said
