"""Which MLP neurons decide a choice: inside each MLP, the few neurons that carry most of what
the layer does to the choice metric CM (analysis/choice_metric.py), patched as a set, and the
tokens they write.

A neuron is one unit of blocks.{l}.mlp.hook_post (after the activation, (B, T, 4C)), patched at
every position as a head is (all it writes). For a set S of neurons, patched both ways (the
twin's activations into the example's run, and the example's into the twin's), the share of
the gap it moves is

    moved(S) = (mean(CM - CM_S on the examples) + mean(CM_S - CM on the twins)) / (2 gap)

with gap = mean CM on the examples - mean CM on the twins: 1 where patching S alone turns the
model's preference into its twin's both ways, 0 where it changes nothing. The whole layer is
S = every neuron. The neurons are ranked by a first-order estimate of what patching each alone
does (choice_metric.first_order), and the deciding set is the smallest top-k (k in SIZES, up to
an eighth of the layer) that moves at least OF_LAYER of what the whole layer moves; where none
does, the largest tried, said as such ("enough": false). A decision that few neurons carry is
found with k of a few; one spread over the layer needs a k of tens, and the report says so.
Each of the first SHOWN neurons is also patched alone.

The tokens a neuron writes: its output weights (a column of mlp.w_out) read by the unembedding
through the final LayerNorm's gain (direct logit attribution; the normalisation's scale, the
same for every token, is left out), the WRITES tokens it raises most when it fires.
"""

import torch
from torch import nn

from analysis.choice_metric import first_order, patch_points
from analysis.circuit_results import LayerNeurons
from analysis.patching import Pair
from data.tokenizer import Tokenizer
from model.gpt import GPT

SIZES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)  # deciding sets tried, smallest first
SHOWN = 8  # neurons of a set patched alone and listed with their tokens
OF_LAYER = 0.8  # the share of the whole layer's effect the set must keep
WRITES = 5  # tokens listed per neuron


def gap_moved(clean: torch.Tensor, twin: torch.Tensor, patched: torch.Tensor) -> torch.Tensor:
    """(P,) share of the gap moved by each of P patches (see the module docstring): (N,) CM on
    the examples and on their twins, (P, 2, N) CM patched ([:, 0] into the examples' runs,
    [:, 1] into the twins')."""
    gap = (clean - twin).mean()
    into_clean = (clean - patched[:, 0]).mean(-1)
    into_twin = (patched[:, 1] - twin).mean(-1)
    return (into_clean + into_twin) / (2 * gap)


def written_tokens(model: GPT, tokenizer: Tokenizer | None, layer: int, neuron: int, k=WRITES):
    """The k tokens neuron `neuron` of MLP `layer` raises most when it fires (direct logit
    attribution of its output weights), decoded ("#id" without a tokenizer). A final
    LayerNorm swapped for another module (an nn.Identity, as a linearised model has) is read as the
    identity: no centring, no gain."""
    with torch.no_grad():
        out = model.blocks[layer].mlp.w_out.weight[:, neuron].float()  # (C,)
        if isinstance(model.ln_f, nn.LayerNorm):
            out = out - out.mean()
            out = out * model.ln_f.weight.float() if model.ln_f.weight is not None else out
        logits = model.lm_head.weight[: model.config.vocab_size].float() @ out  # (V,)
    ids = logits.topk(min(k, logits.numel())).indices.tolist()
    return [tokenizer.decode([i]) if tokenizer else f"#{i}" for i in ids]


def deciding_neurons(
    model: GPT, tokenizer: Tokenizer, pairs: list[Pair], layer: int
) -> LayerNeurons:
    """MLP `layer`'s deciding neurons on `pairs` (see the module docstring)."""
    name = f"blocks.{layer}.mlp.hook_post"
    estimate = first_order(model, pairs, [name], dims=(1,))[0]  # (4C,)
    sizes = [k for k in SIZES if k <= max(1, estimate.numel() // 8)]
    ranked = estimate.argsort(descending=True)[: sizes[-1]].tolist()
    points = [(name, ranked[:k]) for k in sizes] + [(name, list(range(estimate.numel())))]
    points += [(name, [n]) for n in ranked[:SHOWN]]
    clean, twin, patched = patch_points(model, pairs, points)
    moved = gap_moved(clean, twin, patched).tolist()
    sets, whole, alone = moved[: len(sizes)], moved[len(sizes)], moved[len(sizes) + 1 :]
    at = next((i for i, m in enumerate(sets) if m >= OF_LAYER * whole), None)
    found = len(sizes) - 1 if at is None else at
    return {
        "layer": layer,
        "neurons": [
            {"index": n, "moved": m, "writes": written_tokens(model, tokenizer, layer, n)}
            for n, m in zip(ranked[: sizes[found]], alone)
        ],
        "count": sizes[found],
        "moved": sets[found],
        "layer_moved": whole,
        "enough": at is not None,
        "size": estimate.numel(),
    }


def neurons_by_layer(model: GPT, tokenizer: Tokenizer, pairs: list[Pair]) -> list[LayerNeurons]:
    """deciding_neurons for every MLP of the model, layer 0 first."""
    return [deciding_neurons(model, tokenizer, pairs, l) for l in range(model.config.n_layer)]
