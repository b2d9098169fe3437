"""Causal tests at the pronoun, on a GPT built by hand so that every delta is worked out below.

The hand-built model reads a char tokenizer's ids. Its LayerNorms are identities and its MLPs
and position embeddings zero; the embedding of token i is the unit vector e_i (tied to the LM
head). In layer 0 queries and keys are zero, so each head attends uniformly to the keys it may
see, and head h copies the token vectors it reads into the residual stream with weight ALPHA[h].
Layer 1 writes nothing (W_O = 0). So at the query q, with K_h the keys head h sees,
    logits = e_{id_q} + sum_h ALPHA[h] * mean_{s in K_h} e_{id_s},
and the next-token loss, hence every delta, follows by hand (`hand_loss`).
"""

import pytest
import torch

from analysis.causal import causal_tests, knockout_at_query, with_best_head
from analysis.interventions import block_keys
from data.pronouns import Example
from data.tokenizer import train_tokenizer
from model.gpt import GPT, GPTConfig
from model.hooks import hooks
from reports.formatting import signed
from reports.text_reports import format_causal
from tests.helpers import explicit_path, zeroed_gpt

TOKENIZER = train_tokenizer("char", "abcdefghijklmnopqrstuvwxyz .")
V = TOKENIZER.vocab_size
ALPHA = (2.0, 1.0)


def known_gpt(block_size=64):
    C, D = 64, 32  # two heads of 32 channels; the V <= 32 token vectors fit in one head
    model = zeroed_gpt(
        vocab_size=V, block_size=block_size, n_layer=2, n_head=2, n_embd=C, vocab_multiple=1
    ).eval()
    with torch.no_grad():
        model.tok_emb.weight[:, :V] = torch.eye(V)
        attn = model.blocks[0].attn
        for h, alpha in enumerate(ALPHA):
            for i in range(V):
                attn.w_qkv.weight[2 * C + h * D + i, i] = 1.0  # head h's value slot i = channel i
                attn.w_out.weight[i, h * D + i] = alpha  # and back to channel i, times alpha
    return model


def example(text, antecedent, *distractors):
    """An Example whose query is the "it" of "its": each candidate word's first occurrence."""

    def span(w):
        return (text.index(w), text.index(w) + len(w))

    p = text.index(" its ") + 1
    return Example(text, (p, p + 2), span(antecedent), [span(d) for d in distractors])


# Char tokens: token index = character index. The token after the query is the "s" of "its": the
# antecedents hold an "s" and the distractors none, so knocking out one or the other moves the
# loss in opposite directions. E1 and E2 have one length, so they share a batch.
E1 = example("the bass saw the cat so its fin hid.", "bass", "cat")
E2 = example("the dog saw the moss so its hue was.", "moss", "dog")
E3 = example("a goose met an ox and its feet hid.", "goose", "ox")
ENDS = Example("the dog saw the cat so it", (23, 25), (4, 7), [(16, 19)])  # no next token
ODD = Example("the dog saw the cat so its fur!", (23, 25), (4, 7), [(16, 19)])  # "!" unknown
USED = [E1, E2, E3]


def reads(ex, dropped=()):
    """(V,) what a uniform head reads at the query: token vectors averaged over the keys left."""
    ids, q = TOKENIZER.encode(ex.text), ex.pronoun[1] - 1
    keys = [s for s in range(q + 1) if s not in dropped]
    out = torch.zeros(V, dtype=torch.float64)
    for s in keys:
        out[ids[s]] += 1 / len(keys)
    return out


def hand_loss(ex, dropped=None, ablated=None):
    """Next-token loss at the query; dropped {head: positions it may not see}, ablated {head:
    (V,) output that replaces what it reads}."""
    dropped, ablated = dropped or {}, ablated or {}
    ids, q = TOKENIZER.encode(ex.text), ex.pronoun[1] - 1
    logits = torch.zeros(V, dtype=torch.float64)
    logits[ids[q]] = 1.0
    for h, alpha in enumerate(ALPHA):
        logits += alpha * ablated.get(h, reads(ex, dropped.get(h, ())))
    return -torch.log_softmax(logits, 0)[ids[q + 1]].item()


def hand_delta(exs, **edit):
    return sum(hand_loss(ex, **edit) - hand_loss(ex) for ex in exs) / len(exs)


def tokens(span):
    return range(*span)  # one token per character


@pytest.fixture(scope="module")
def result():
    return causal_tests(known_gpt(), TOKENIZER, [E1, ENDS, E2, ODD, E3], resamples=200)


def test_examples_without_a_next_token_or_that_cannot_be_encoded_are_skipped(result):
    assert (result["n"], result["skipped"]) == (3, 2)
    assert result["clean_loss"] == pytest.approx(sum(hand_loss(ex) for ex in USED) / 3, abs=1e-6)


def test_antecedent_and_distractor_knockouts_give_the_deltas_worked_out_by_hand(result):
    def ante(ex):
        return tokens(ex.antecedent)

    def distr(ex):
        return tokens(ex.distractors[0])

    for h in range(2):
        cell = result["heads"][0][h]
        expected_ante = sum(hand_loss(ex, {h: ante(ex)}) - hand_loss(ex) for ex in USED) / 3
        expected_distr = sum(hand_loss(ex, {h: distr(ex)}) - hand_loss(ex) for ex in USED) / 3
        assert cell["antecedent"] == pytest.approx(expected_ante, abs=1e-5)
        assert cell["distractor"] == pytest.approx(expected_distr, abs=1e-5)
        assert expected_ante > 0.05 and expected_distr < -0.01  # opposite, as designed

    def both(f):
        return sum(hand_loss(ex, {0: f(ex), 1: f(ex)}) - hand_loss(ex) for ex in USED) / 3

    for together in (result["layers"][0], result["all_heads"]):  # layer 1 writes nothing
        assert together["antecedent"] == pytest.approx(both(ante), abs=1e-5)
        assert together["distractor"] == pytest.approx(both(distr), abs=1e-5)
    assert result["layers"][1]["antecedent"] == 0.0 and result["layers"][1]["distractor"] == 0.0
    assert all(v == 0.0 for cell in result["heads"][1] for k, v in cell.items() if "_" not in k)


def test_head_ablation_puts_the_mean_output_at_the_query_as_worked_out_by_hand(result):
    mean = sum(reads(ex) for ex in USED) / 3  # both heads read the same, uniformly
    for h in range(2):
        expected = sum(hand_loss(ex, ablated={h: mean}) - hand_loss(ex) for ex in USED) / 3
        assert result["heads"][0][h]["ablation"] == pytest.approx(expected, abs=1e-5)
        assert abs(expected) > 1e-3  # far from 0 at this tolerance: the ablation did act


def test_intervals_hold_the_mean_and_are_seeded(result):
    for d in (result["all_heads"], *result["layers"], result["heads"][0][0]):
        for name in ("antecedent", "distractor"):
            lo, hi = d[f"{name}_ci"]
            assert lo <= d[name] + 1e-12 and d[name] <= hi + 1e-12
    again = causal_tests(known_gpt(), TOKENIZER, [E1, ENDS, E2, ODD, E3], resamples=200)
    assert again == result


def test_an_example_longer_than_block_size_is_measured_in_the_window_the_probe_reads():
    # Block 20: at "it" the model reads the last 20 tokens, "ss saw the cat so it" (half of the
    # antecedent "bass" among them), and the next token is still the "s" of "its". The window is
    # an example of its own for the hand-worked model (its position embeddings are zero).
    window = Example(E1.text[6:], (18, 20), (0, 2), [(11, 14)])
    r = causal_tests(known_gpt(block_size=20), TOKENIZER, [E1], resamples=10)
    assert (r["n"], r["skipped"]) == (1, 0)
    assert r["clean_loss"] == pytest.approx(hand_loss(window), abs=1e-6)
    assert abs(hand_loss(window) - hand_loss(E1)) > 1e-3  # the window is what was read
    for h in range(2):
        dropped = {h: tokens(window.antecedent)}
        expected = hand_loss(window, dropped) - hand_loss(window)
        assert r["heads"][0][h]["antecedent"] == pytest.approx(expected, abs=1e-5)


def test_a_refusal_says_why_no_example_can_be_tested():
    from analysis.errors import NothingToMeasure

    # Block 4: at "it" the window holds "o it", neither "bass" nor "cat".
    with pytest.raises(NothingToMeasure, match=r"1 because its antecedent .*before the model's wi"):
        causal_tests(known_gpt(block_size=4), TOKENIZER, [E1], resamples=10)
    with pytest.raises(NothingToMeasure, match=r"2 because its text ends at the pronoun"):
        causal_tests(known_gpt(), TOKENIZER, [ENDS, ENDS], resamples=10)


def test_the_control_distractor_is_drawn_with_the_seed_among_the_ones_the_query_sees():
    # Two distractors before the pronoun, one after it (the query cannot see "bee").
    ex = example("a dog saw a cat and an owl so its bee hid.", "dog", "cat", "owl", "bee")
    options = {hand_loss(ex, {0: tokens(ex.distractors[k])}) - hand_loss(ex) for k in (0, 1)}
    drawn = {
        causal_tests(known_gpt(), TOKENIZER, [ex], seed=s, resamples=10)["heads"][0][0][
            "distractor"
        ]
        for s in range(8)
    }
    assert (
        len(drawn) == 2
    )  # both are drawn over seeds, never "bee" (whose knockout changes nothing)
    for d in drawn:
        assert min(abs(d - o) for o in options) < 1e-5


@torch.no_grad()
def test_an_empty_key_set_and_the_own_mean_on_one_example_change_nothing():
    torch.manual_seed(0)
    model = GPT(
        GPTConfig(vocab_size=V, block_size=64, n_layer=2, n_head=2, n_embd=16, vocab_multiple=1)
    ).eval()
    idx = torch.tensor([TOKENIZER.encode(E1.text)])
    with explicit_path(model):
        clean = model(idx)
    empty = knockout_at_query(
        torch.ones(2, 2, dtype=torch.bool), torch.zeros(1, idx.size(1), dtype=torch.bool)
    )
    with hooks(model, empty):
        assert torch.equal(model(idx), clean)
    r = causal_tests(model, TOKENIZER, [E1], resamples=10)
    assert [[cell["ablation"] for cell in row] for row in r["heads"]] == [[0.0, 0.0], [0.0, 0.0]]
    assert r["heads"][0][0]["antecedent"] != 0.0  # a real model does feel the knockout


@torch.no_grad()
def test_the_query_alone_after_a_cache_gives_the_knockout_of_a_whole_forward_pass():
    torch.manual_seed(0)
    model = GPT(
        GPTConfig(vocab_size=V, block_size=64, n_layer=2, n_head=2, n_embd=16, vocab_multiple=1)
    ).eval()
    r = causal_tests(model, TOKENIZER, [E3], resamples=10)
    ids = TOKENIZER.encode(E3.text)
    q = E3.pronoun[1] - 1
    idx = torch.tensor([ids[: q + 1]])
    blocked = torch.zeros(1, 2, q + 1, q + 1, dtype=torch.bool)
    blocked[0, 1, q, list(tokens(E3.antecedent))] = True  # layer 1, head 1

    def loss(edit):
        with hooks(model, edit):
            logits = model(idx)[0, q]
        return -torch.log_softmax(logits, 0)[ids[q + 1]].item()

    knockout = {"blocks.1.attn.hook_attn_scores": block_keys(blocked)}
    assert r["heads"][1][1]["antecedent"] == pytest.approx(loss(knockout) - loss({}), abs=1e-5)


def test_best_head_is_added_from_the_grid(result):
    best = with_best_head(result, 0, 1)["best_head"]
    assert best == {"layer": 0, "head": 1, **result["heads"][0][1]}
    assert "best_head" not in result


def test_report_puts_the_control_beside_the_grid_and_gives_intervals(result):
    few = format_causal(with_best_head(result, 0, 1))  # 3 examples: too few for intervals
    assert (
        "means only: 3 examples are too few for intervals" in few
        and "[" not in few.split("heads together")[1]
    )
    report = format_causal(with_best_head({**result, "n": 25}, 0, 1))  # as if over 25
    lines = report.splitlines()
    row = next(line for line in lines if line.startswith("L0 "))
    ante, control = row.split(" | ")
    cells = result["heads"][0]
    assert ante.split()[1:] == [signed(c["antecedent"]) for c in cells]  # 0.00 unsigned
    assert control.split() == [signed(c["distractor"]) for c in cells]
    assert "mean over 25 examples, 2 skipped" in report
    lo, hi = result["all_heads"]["antecedent_ci"]
    said = f"{signed(result['all_heads']['antecedent'])} [{signed(lo)}, {signed(hi)}]"
    assert f"all layers    antecedent {said}" in report
    together = lines[lines.index(next(ln for ln in lines if ln.startswith("heads together"))) :]
    rows = [ln for ln in together if ln.startswith("  ") and " control " in ln]
    assert len(rows) == 4 and len({ln.index(" control ") for ln in rows}) == 1, (
        rows
    )  # signed or not
    assert len({len(ln) for ln in rows}) == 1, rows
    at = lines.index(next(line for line in lines if line.startswith("  L0 H1 alone ")))
    ablation = lines[at + 1].split()
    assert ablation[:2] == ["ablation", signed(result["heads"][0][1]["ablation"])], ablation


def test_report_of_144_heads_stacks_the_grids_within_100_columns():
    cell = {k: -10.5 for k in ("antecedent", "distractor", "ablation")}
    cell.update({f"{k}_ci": [-10.75, -10.25] for k in ("antecedent", "distractor", "ablation")})
    together = {
        "antecedent": -10.25,
        "distractor": 0.0,
        "antecedent_ci": [-12.0, -10.5],
        "distractor_ci": [-10.1, 10.1],
    }
    big = {
        "heads": [[cell] * 12] * 12,
        "layers": [together] * 12,
        "all_heads": together,
        "n": 300,
        "skipped": 0,
        "clean_loss": 1.0,
        "resamples": 1000,
    }
    lines = format_causal(with_best_head(big, 11, 11)).splitlines()
    assert max(len(line) for line in lines) <= 100
    assert sum(line.startswith("L11 ") for line in lines) == 3  # antecedent, control, ablation


def test_the_bootstrap_gathers_a_few_resamples_at_a_time_with_the_same_intervals(monkeypatch):
    import analysis.bootstrap as bootstrap

    values = {"a": torch.randn(500, dtype=torch.float64), "b": torch.rand(500).double()}
    draws = bootstrap.resample(500, 1000, seed=3)
    monkeypatch.setattr(bootstrap, "RESAMPLES_AT_ONCE", 10**9)
    whole = bootstrap.means_with_intervals(values, draws)
    monkeypatch.setattr(bootstrap, "RESAMPLES_AT_ONCE", 7)
    assert bootstrap.means_with_intervals(values, draws) == whole
    assert whole["a_ci"][0] < whole["a"] < whole["a_ci"][1]
