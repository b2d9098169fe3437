"""The model's own answer (analysis/answer.py) against a hand-set model whose predictions are
known exactly, plus the report and generate.py's JSON on a real run folder.

The hand-set model reads a word vocabulary (each word with its leading spaces is one token, as
a BPE vocabulary trained on these sentences would have it) and predicts by the longest run of
tokens ending at the position that occurs in REFERENCE: the next token is one that follows
that run there (an infinite-gram model). In REFERENCE only "dog" is followed by "barked", only
"cat" by "purred", and "so it" by "barked"; so in "the cat saw the dog so it barked." only the
dog fits the rest of the sentence, and only the dog leaves the model expecting what it expects
after "it". Its attention is KnownModel's (tests/helpers.py), every rule exact.
"""

import json
import math
import re

import pytest
import torch

from analysis.answer import model_answer, phrase, substitute
from data.pronouns import Example, examples, write_jsonl
from reports.answer_report import format_answer
from tests.helpers import KnownModel, make_run, run_generate, uniform

REFERENCE = "the dog barked. the cat purred. the cow mooed. so it barked."
TOKEN_RE = re.compile(r"\s*(?:\w+|[^\w\s])")
EPS = 1e-6  # every token keeps a little probability, so every log-probability is finite


class WordTokenizer:
    """Each word, or punctuation mark, with the spaces before it is one token."""

    def __init__(self, text):
        self.vocab = sorted({m.group() for m in TOKEN_RE.finditer(text)})
        self.vocab_size = len(self.vocab)

    def encode_with_offsets(self, text):
        found = list(TOKEN_RE.finditer(text))
        if any(m.group() not in self.vocab for m in found):
            raise ValueError("a word outside the vocabulary")
        return [self.vocab.index(m.group()) for m in found], [m.start() for m in found]

    def decode(self, ids):
        return "".join(self.vocab[i] for i in ids)


TOKENIZER = WordTokenizer(REFERENCE + " saw the It")  # no "The": a capital phrase is unknown


def first_noun(ids, t):
    """All attention on token 1, the first noun of "the xxx ...": the head picks the first
    candidate."""
    return {1: 1.0} if t >= 1 else {0: 1.0}


class InfiniteGram(KnownModel):
    """KnownModel's attention (through the hook points), and the next token by the longest run
    of tokens ending at each position that occurs in REFERENCE (see the module docstring)."""

    def __init__(self, block_size=64):
        super().__init__([[first_noun, uniform]], TOKENIZER.vocab_size, block_size)
        self.reference = TOKENIZER.encode_with_offsets(REFERENCE)[0]
        self.inputs = []  # the length of every input, to check the window

    def forward(self, idx):
        super().forward(idx)
        self.inputs.append(idx.shape[1])
        B, T = idx.shape
        logits = torch.zeros(B, T, TOKENIZER.vocab_size, dtype=torch.float64)
        for b in range(B):
            ids = idx[b].tolist()
            for t in range(T):
                logits[b, t] = self.next_logits(ids[: t + 1])
        return logits

    def next_logits(self, context):
        ref = self.reference
        for n in range(len(context), 0, -1):
            follow = [ref[i + n] for i in range(len(ref) - n) if ref[i : i + n] == context[-n:]]
            if follow:
                counts = torch.bincount(torch.tensor(follow), minlength=TOKENIZER.vocab_size)
                return (counts.double() + EPS).log()
        return torch.zeros(TOKENIZER.vocab_size, dtype=torch.float64)


def item(text, antecedent, distractor, kind=None):
    def span(w):
        return (text.index(f" {w}") + 1, text.index(f" {w}") + 1 + len(w))

    p = text.index(" it") + 1
    return Example(text, (p, p + 2), span(antecedent), [span(distractor)], kind)


# The dog is the antecedent of all four; in the last, the rest of the sentence fits the cat.
SET = [
    item("the cat saw the dog so it barked.", "dog", "cat", "agreement"),
    item("the dog saw the cat so it barked.", "dog", "cat", "agreement"),
    item("the dog saw the cow so it barked.", "dog", "cow", "meaning"),
    item("the dog saw the cat so it purred.", "dog", "cat", "meaning"),
]


def test_the_phrase_takes_the_pronouns_capital_and_a_name_stays_as_written():
    ex = Example("Anna met the dog. It ran.", (18, 20), (13, 16), [(0, 4)])
    assert phrase(ex, ex.antecedent) == "The dog" and phrase(ex, (0, 4)) == "Anna"
    sub = substitute(TOKENIZER, SET[0], SET[0].antecedent)
    assert TOKENIZER.decode(sub.ids) == "the cat saw the dog so the dog barked."
    assert TOKENIZER.vocab[sub.ids[sub.last]] == " dog"  # the phrase's last token


def test_the_answer_is_the_only_candidate_that_fits():
    result = model_answer(InfiniteGram(), TOKENIZER, SET[:1], head=(0, 0))
    # The head looks at the first noun, the cat; both readings of the model name the dog.
    assert result["all"]["cand_at_1"] == {"substitution": 1.0, "closeness": 1.0, "head": 0.0}
    assert result["all"]["agreement"] == {"substitution": 0.0, "closeness": 0.0}


def test_cand_at_1_baselines_and_agreement_are_exact_on_a_constructed_set():
    result = model_answer(InfiniteGram(), TOKENIZER, SET, head=(0, 0))
    every = result["all"]
    # substitution misses the last item (the cat purrs); closeness reads at the pronoun, where
    # "so it" expects "barked", the dog's doing, in all four. The head picks the first noun.
    assert every["cand_at_1"] == {"substitution": 0.75, "closeness": 1.0, "head": 0.75}
    assert every["agreement"] == {"substitution": 0.5, "closeness": 0.75}
    assert every["baselines"] == {"random": 0.5, "first": 0.75, "nearest": 0.25}
    assert every["no_answer"] == {"substitution": 0, "closeness": 0}
    assert result["decided_by"]["meaning"]["cand_at_1"] == {
        "substitution": 0.5,
        "closeness": 1.0,
        "head": 1.0,
    }
    assert list(result["decided_by"]) == ["agreement", "meaning"]
    assert (result["n"], result["skipped"], result["head"]) == (4, 0, {"layer": 0, "head": 0})
    assert "cand_at_1_ci" not in every  # 4 items: below MIN_FOR_STATS


def test_a_text_longer_than_the_window_is_read_in_windows_with_the_same_answer():
    # Three tokens of context are all the infinite-gram needs here ("so", "it"; "the", "dog").
    short = InfiniteGram(block_size=4)
    result = model_answer(short, TOKENIZER, SET, head=(0, 0))
    assert max(short.inputs) == 4
    cand = result["all"]["cand_at_1"]  # the head's token 1 is now another word: not compared
    assert (cand["substitution"], cand["closeness"]) == (0.75, 1.0)


def test_an_item_with_nothing_after_the_pronoun_has_no_substitution_answer():
    ex = Example("the dog saw the cat so it", (23, 25), (4, 7), [(16, 19)])
    result = model_answer(InfiniteGram(), TOKENIZER, [ex], head=(0, 0))
    assert result["all"]["no_answer"] == {"substitution": 1, "closeness": 0}
    assert result["all"]["cand_at_1"]["closeness"] == 1.0


def test_an_example_the_tokenizer_cannot_encode_with_a_candidate_in_place_is_skipped():
    # "It" is in the vocabulary, "The" is not: the text encodes, "The dog barked." does not.
    unknown = Example("the cat saw the dog. It barked.", (21, 23), (16, 19), [(4, 7)])
    assert TOKENIZER.encode_with_offsets(unknown.text)
    result = model_answer(InfiniteGram(), TOKENIZER, [SET[0], unknown], head=(0, 0))
    assert (result["n"], result["skipped"]) == (1, 1)
    with pytest.raises(ValueError):
        model_answer(InfiniteGram(), TOKENIZER, [unknown], head=(0, 0))


def test_intervals_come_from_twenty_items_and_hold_the_point_value():
    many = SET * 5  # 20 items: enough for intervals
    result = model_answer(InfiniteGram(), TOKENIZER, many, head=(0, 0))
    ci = result["all"]["cand_at_1_ci"]
    assert ci["closeness"] == [1.0, 1.0]  # every resample is all hits
    lo, hi = ci["substitution"]
    assert lo < 0.75 < hi and result["all"]["cand_at_1"]["substitution"] == 0.75
    assert "[" in format_answer(result).splitlines()[2]  # the "all" row shows them
    assert "cand_at_1_ci" not in result["decided_by"]["meaning"]  # 10 items: none


def test_a_long_file_is_read_a_few_examples_at_a_time_with_the_same_answers(monkeypatch):
    import analysis.answer

    unknown = Example("the cat saw the dog. It barked.", (21, 23), (16, 19), [(4, 7)])
    many = (SET + [unknown]) * 5  # skipped ones among them, in every part
    whole = model_answer(InfiniteGram(), TOKENIZER, many, head=(0, 0))
    monkeypatch.setattr(analysis.answer, "EXAMPLES_AT_ONCE", 3)
    read = []
    real_run = analysis.answer._run
    monkeypatch.setattr(
        analysis.answer,
        "_run",
        lambda model, requests: read.append(len(requests)) or real_run(model, requests),
    )
    parts = model_answer(InfiniteGram(), TOKENIZER, many, head=(0, 0))
    assert parts == whole and (whole["n"], whole["skipped"]) == (20, 5)
    assert len(read) == -(-len(many) // 3)  # each part's rows on their own


def test_a_one_example_set_prints_no_intervals():
    text = format_answer(model_answer(InfiniteGram(), TOKENIZER, SET[:1], head=(0, 0)))
    assert "[" not in text and "no intervals" in text
    row = next(line.split() for line in text.splitlines() if line.strip().startswith("all"))
    assert row == ["all", "1", "100.0%", "100.0%", "0.0%"]


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("run")
    make_run(folder, "bpe", 64)
    return folder


def test_generate_probe_json_has_the_model_answer_and_the_report_shows_it(run_folder, tmp_path):
    path = tmp_path / "mine.jsonl"
    write_jsonl(examples("dev")[:30], path)
    argv = ("--ckpt", run_folder, "--probe", path, "--permutations", "5", "--no-causal")
    code, out, _ = run_generate(*argv, "--json")
    result = json.loads(out)
    answer = result["model_answer"]
    assert code == 0 and answer["n"] == 30 and answer["methods"] == ["substitution", "closeness"]
    best = result["best_head"]
    assert answer["head"] == {"layer": best["layer"], "head": best["head"]}
    assert (
        answer["all"]["cand_at_1"]["head"] == best["all"]
    )  # one set: the same items, the same head
    assert set(answer["all"]["cand_at_1_ci"]) == {"substitution", "closeness", "head"}
    code, report, _ = run_generate(*argv)
    lines = report.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("The model's own answer"))
    assert (
        lines.index(
            "Pronoun probe: read at the pronoun, does a head's attention pick its antecedent?"
        )
        < at
        < len(lines)
    )
    row = next(line.split() for line in lines[at:] if line.strip().startswith("all "))
    sub = answer["all"]["cand_at_1"]["substitution"]
    assert row[:3] == ["all", "30", f"{sub:.1%}"]
    assert max(map(len, lines)) <= 80


def test_a_one_example_file_prints_the_answer_without_intervals(run_folder, tmp_path):
    path = tmp_path / "one.jsonl"
    write_jsonl(examples("test")[:1], path)
    code, out, err = run_generate(
        "--ckpt", run_folder, "--probe", path, "--permutations", "5", "--no-causal"
    )
    assert code == 0, err
    section = out[out.index("The model's own answer") :].split("\n\n")[0]
    assert "[" not in section and "1 examples are too few" in " ".join(section.split())
    assert not math.isnan(float(section.splitlines()[-1].split()[2].rstrip("%")))


def test_the_page_shows_the_models_answer_beside_the_best_head():
    from reports.probe_tables import answer_table

    def row(n, s, c, h):
        return {
            "examples": n,
            "cand_at_1": {"substitution": s, "closeness": c, "head": h},
        }

    answer = {
        "methods": ["substitution", "closeness"],
        "head": {"layer": 0, "head": 2},
        "all": row(300, 0.92, 0.813, 0.89),
        "decided_by": {"meaning": row(42, 0.81, 0.452, 0.595)},
    }
    table = answer_table(answer)
    assert "<th>L0 H2</th>" in table and "meaning (42)" in table
    assert all(cell in table for cell in (">92.0%<", ">81.3%<", ">89.0%<", ">45.2%<"))
    assert answer_table(None) == ""
