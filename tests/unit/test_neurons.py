"""analysis/neurons.py on a model built by hand, whose deciding neurons are known: neuron 0 of
the MLP fires on pronoun token 1 and writes token 5, neuron 1 fires on pronoun token 2 and
writes token 6, and nothing else in the model moves the choice between 5 and 6."""

import math

import pytest
import torch

from analysis.neurons import deciding_neurons, gap_moved, written_tokens
from analysis.patching import Pair
from model.gpt import GPT, GPTConfig

V = torch.tensor([1.0, -1, 1, -1, 1, -1, 1, -1])  # the pronoun's direction (mean 0, variance 1)
U = torch.tensor([1.0, 1, -1, -1, 1, 1, -1, -1])  # what the deciding neurons write (⟂ V)
W = torch.tensor([1.0, -1, -1, 1, 1, -1, -1, 1])  # the filler token (⟂ both)
STRENGTH = 3.0


class Names:
    """A tokenizer's decode, enough for written_tokens: token i is "t{i}"."""

    def decode(self, ids):
        return "".join(f"t{i}" for i in ids)


def hand_built(extra_neuron=False):
    """The model of the module docstring. With `extra_neuron`, neuron 2 fires as strongly on both
    pronouns and writes token 5: it moves CM in both runs alike, so patching it changes nothing."""
    config = GPTConfig(
        vocab_size=8, block_size=4, n_layer=1, n_head=1, n_embd=8, vocab_multiple=8,
        tie_embeddings=False, mlp_activation="relu2",
    )  # fmt: skip
    model = GPT(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        for ln in (model.blocks[0].ln_1, model.blocks[0].ln_2, model.ln_f):
            ln.weight.fill_(1.0)
        model.tok_emb.weight[1], model.tok_emb.weight[2], model.tok_emb.weight[3] = V, -V, W
        mlp = model.blocks[0].mlp
        mlp.w_in.weight[0], mlp.w_in.weight[1] = V / 8, -V / 8  # pre-activation ±1 on ±V
        mlp.w_out.weight[:, 0], mlp.w_out.weight[:, 1] = STRENGTH * U, -STRENGTH * U
        if extra_neuron:
            mlp.w_in.bias[2] = 1.0  # fires on every token alike
            mlp.w_out.weight[:, 2] = U
        model.lm_head.weight[5], model.lm_head.weight[6] = U, -U
    return model


PAIRS = [Pair([3, 1], [3, 2], [1], 5, 6), Pair([3, 3, 1], [3, 3, 2], [2], 5, 6)]


def cm(model, ids):
    logits = model(torch.tensor([ids]))[0, -1]
    return (logits[5] - logits[6]).item()


def test_the_hand_built_model_decides_as_built():
    model = hand_built()
    expected = 2 * STRENGTH * 8 / math.sqrt(1 + STRENGTH**2)  # 2 U·LN(V + 3U)
    assert cm(model, [3, 1]) == pytest.approx(expected, rel=1e-4)
    assert cm(model, [3, 2]) == pytest.approx(-expected, rel=1e-4)


@pytest.mark.parametrize("extra", [False, True])
def test_the_two_deciding_neurons_are_found_and_patched_together_move_the_whole_gap(extra):
    found = deciding_neurons(hand_built(extra), Names(), PAIRS, layer=0)
    assert sorted(n["index"] for n in found["neurons"]) == [0, 1]
    assert found["moved"] == pytest.approx(1.0, abs=1e-4)
    assert found["layer_moved"] == pytest.approx(1.0, abs=1e-4)
    assert found["enough"] and found["count"] == 2 and found["size"] == 32
    # Alone, each takes its own run's side away: the example's preference (or the twin's) goes
    # to 0, half of the gap.
    assert [n["moved"] for n in found["neurons"]] == pytest.approx([0.5, 0.5], abs=1e-4)
    writes = {n["index"]: n["writes"][0] for n in found["neurons"]}
    assert writes == {0: "t5", 1: "t6"}


def test_a_neuron_that_fires_alike_in_both_runs_is_not_named():
    found = deciding_neurons(hand_built(extra_neuron=True), Names(), PAIRS, layer=0)
    assert 2 not in [n["index"] for n in found["neurons"]]


def test_gap_moved_reads_both_directions():
    clean, twin = torch.tensor([4.0, 2.0]), torch.tensor([-2.0, -4.0])  # gap 6
    patched = torch.tensor(
        [
            [[4.0, 2.0], [-2.0, -4.0]],  # nothing moves
            [[-2.0, -4.0], [4.0, 2.0]],  # each run takes the other's CM
            [[1.0, -1.0], [-2.0, -4.0]],  # the examples' runs lose half of the gap
        ]
    )
    assert gap_moved(clean, twin, patched).tolist() == pytest.approx([0.0, 1.0, 0.25])


def test_written_tokens_read_the_output_weights_through_the_unembedding():
    model = hand_built()
    assert written_tokens(model, Names(), 0, 0, k=1) == ["t5"]
    assert written_tokens(model, Names(), 0, 1, k=1) == ["t6"]


def test_written_tokens_without_a_tokenizer_or_a_final_layernorm_are_ids():
    model = hand_built()
    model.ln_f = torch.nn.Identity()  # as a linearised model has it
    assert written_tokens(model, None, 0, 0, k=2)[0] == "#5"
