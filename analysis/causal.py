"""Does the model USE what its heads attend to? Knock attention out and watch the loss.

The probe shows where a head looks from the pronoun; this measures whether looking there matters.
At the pronoun's last token (the query, as in the probe) the model predicts the next token; its
loss there is the cross-entropy of that token. Each test changes one thing inside attention, for
the query only, through the model's hook points (model.hooks), and reports the
change in that loss in nats, intervened minus clean, per example:
- antecedent knockout: in the chosen heads the query may not attend to the antecedent's tokens
  (the tokens the probe sums); its attention renormalises over the other keys;
- distractor knockout, the control: the same for one distractor per example, drawn at random
  with a fixed seed among those the query can see;
- head ablation: the head's output at the query replaced by its mean over the example set
  (the mean of its outputs at each example's query).
Knockouts run for every head alone (an L x H grid), for each layer's heads together and for all
heads together; ablation for every head alone. Means come with a 95% percentile bootstrap
interval: examples are resampled with replacement, the same resamples for every measure.

An example is read as the probe reads it: in the model's window at the pronoun, the last
block_size tokens up to the query when the text up to it is longer (analysis.words.model_window),
and its next token is the one after the query in the text. It is skipped (and counted) when the
tokenizer cannot encode it, when the text ends at the pronoun, or when the query sees no token of
the antecedent or of any distractor (in a window, they may lie before it). Examples of one
length run as one batch; the tokens before the query are read once into KV caches, and each
intervention reruns the query alone (nothing before it changes).
The model should be in eval mode (dropout would add noise).

Letters: N examples, L layers, H heads, B batch, T tokens, D head size.
"""

import random
from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

import torch

from analysis.batching import BATCH_SIZE, by_length
from analysis.bootstrap import means_with_intervals, resample
from analysis.errors import NothingToMeasure
from analysis.interventions import block_keys, replace_where
from analysis.items import encode_item
from analysis.results import CausalResult, CausalStudy
from data.pronouns import Example
from data.tokenizer import Tokenizer
from model.gpt import GPT, lm_loss
from model.hooks import hooks, per_layer

MEASURES = ("antecedent", "distractor")  # knockouts, reported for layers and all heads


class _Case(NamedTuple):
    ids: list[int]  # what the model reads, up to and including the query
    target: int  # the token after the query
    antecedent: list[int]  # indices in ids of the antecedent's tokens the query sees
    distractor: list[int]  # the same for the drawn distractor


class _Batch(NamedTuple):
    query: torch.Tensor  # (B, 1) the query's token, the last position
    target: torch.Tensor  # (B,) the token after it
    antecedent: torch.Tensor  # (B, T) bool: the antecedent's tokens among the T read
    distractor: torch.Tensor  # (B, T) bool: the drawn distractor's tokens
    caches: list  # one KVCache per layer, holding the T - 1 tokens before the query


# Why an example cannot be tested, the first that applies, as the refusal says it.
SKIPPED_BECAUSE = {
    "unencodable": "the tokenizer cannot encode its characters",
    "text ends": "its text ends at the pronoun, so there is no next token to predict",
    "window": "its antecedent or every distractor lies before the model's window (the "
    "block_size tokens up to the pronoun); shorten the text before the pronoun",
    "no candidate": "the pronoun sees no token of its antecedent or of any distractor",
}


def _cases(tokenizer, examples, block_size, seed):
    """(cases, why): the usable examples as _Case, and a Counter of why the others were skipped
    (SKIPPED_BECAUSE's keys; see above)."""
    rng = random.Random(seed)
    cases, why = [], Counter()
    for ex in examples:
        item = encode_item(tokenizer, ex, block_size)
        if item is None or item.next_id is None:
            why["unencodable" if item is None else "text ends"] += 1
            continue
        seen = [k for k, toks in enumerate(item.tokens) if toks and k != item.antecedent]
        if not item.tokens[item.antecedent] or not seen:
            why["window" if item.windowed else "no candidate"] += 1
            continue
        cases.append(
            _Case(
                item.ids[: item.query + 1],
                item.next_id,
                item.tokens[item.antecedent],
                item.tokens[rng.choice(seen)],
            )
        )
    return cases, why


def _why_none(why):
    """The reasons of a Counter from _cases, most frequent first, with their counts."""
    return "; ".join(f"{n} because {SKIPPED_BECAUSE[key]}" for key, n in why.most_common())


def _prefill(model, cases, device):
    """A _Batch of equal-length cases, their tokens before the query read into KV caches once:
    an intervention at the query changes nothing before it, so each one reruns the query only."""
    B, T = len(cases), len(cases[0].ids)
    idx = torch.tensor([c.ids for c in cases], device=device)  # (B, T)
    keys = torch.zeros(2, B, T, dtype=torch.bool)
    for b, c in enumerate(cases):
        keys[0, b, c.antecedent] = keys[1, b, c.distractor] = True
    caches = model.new_caches(B)
    if T > 1:
        model(idx[:, :-1], caches=caches)
    target = torch.tensor([c.target for c in cases], device=device)
    return _Batch(idx[:, -1:], target, keys[0].to(device), keys[1].to(device), caches)


def knockout_at_query(heads: torch.Tensor, keys: torch.Tensor) -> dict[str, Callable]:
    """Hooks for one query position: in the heads marked in `heads` (L, H), the query of batch
    row b may not attend to the keys marked in keys[b] (B, S)."""
    heads = heads.to(keys.device)
    return {
        f"blocks.{l}.attn.hook_attn_scores": block_keys(
            heads[l][None, :, None, None] & keys[:, None, None, :]
        )  # (B, H, 1, S)
        for l in range(heads.size(0))
        if heads[l].any()
    }


def ablate_at_query(heads: torch.Tensor, mean: torch.Tensor) -> dict[str, Callable]:
    """Hooks for one query position: the heads marked in `heads` (L, H) output mean[l, h]
    (L, H, D) there (hook_z is (B, T, H, D))."""
    heads = heads.to(mean.device)
    return {
        f"blocks.{l}.attn.hook_z": replace_where(
            heads[l][None, None, :], mean[l][None, None]
        )  # (1, 1, H), (1, 1, H, D)
        for l in range(heads.size(0))
        if heads[l].any()
    }


def _query_loss(model, batch, edits=None):
    """((B,) loss of the token after the query, (B, L, H, D) heads' outputs at the query), with
    the hooks `edits` installed."""
    names, outputs = per_layer("attn.hook_z", model.config.n_layer), {}
    keep = {name: lambda z, hook: outputs.__setitem__(hook.name, z[:, -1]) for name in names}
    with hooks(model, edits or {}), hooks(model, keep):  # kept after the edits
        logits = model(batch.query, caches=batch.caches)[:, -1]  # (B, V)
    for cache in batch.caches:
        cache.rewind()  # forget the query: the next intervention reads it again
    loss = lm_loss(logits.float(), batch.target, reduction="none")
    return loss.double().cpu(), torch.stack([outputs[n] for n in names], dim=1)  # (B, L, H, D)


def _clean_pass(model, chunks, device):
    """Pass 1: ((N,) clean loss in chunk order, as every delta, and (L, H, D) each head's mean
    output at the query, for the ablation)."""
    clean, total = [], 0.0
    for chunk in chunks:
        loss, outputs = _query_loss(model, _prefill(model, chunk, device))
        clean.append(loss)
        total = total + outputs.double().sum(0)
    clean = torch.cat(clean)
    return clean, (total / len(clean)).to(outputs.dtype)


def _heads_of(L, H, layer, head):
    """(L, H) bool: every head (layer None), one layer's heads (head None), or one head."""
    heads = torch.zeros(L, H, dtype=torch.bool)
    heads[slice(None) if layer is None else layer, slice(None) if head is None else head] = True
    return heads


@torch.no_grad()
def causal_tests(
    model: GPT,
    tokenizer: Tokenizer,
    examples: list[Example],
    seed: int = 0,
    resamples: int = 1000,
    batch_size: int = BATCH_SIZE,
) -> CausalResult:
    """Knockout and ablation at the pronoun for labelled examples (data.pronouns.Example); see
    the module docstring and, for each key, analysis.results.CausalResult. Every delta is in
    nats (intervened - clean), every interval the 2.5th..97.5th percentile of `resamples`
    bootstrap means."""
    cfg = model.config
    L, H = cfg.n_layer, cfg.n_head
    cases, why = _cases(tokenizer, examples, cfg.block_size, seed)
    skipped = sum(why.values())
    if not cases:
        raise NothingToMeasure(
            "causal", f"none of the {len(examples)} examples can be tested: {_why_none(why)}"
        )
    device = next(model.parameters()).device
    chunks = [
        [cases[i] for i in batch]
        for batch in by_length([len(c.ids) for c in cases], batch_size, shortest_first=True)
    ]
    clean, mean = _clean_pass(model, chunks, device)

    # Pass 2: every intervention, one batch at a time (only one batch's KV caches are held).
    scopes = [
        (None, None),
        *((l, None) for l in range(L)),
        *((l, h) for l in range(L) for h in range(H)),
    ]
    losses = {}  # (layer, head, kind) -> per batch (B,) losses; None stands for "all"
    for chunk in chunks:
        batch = _prefill(model, chunk, device)
        for layer, head in scopes:
            heads = _heads_of(L, H, layer, head)
            edits = {k: knockout_at_query(heads, getattr(batch, k)) for k in MEASURES}
            if head is not None:  # ablation is measured for single heads
                edits["ablation"] = ablate_at_query(heads, mean)
            for kind, edit in edits.items():
                losses.setdefault((layer, head, kind), []).append(
                    _query_loss(model, batch, edit)[0]
                )

    draws = resample(len(cases), resamples, seed)

    def summary(layer, head, kinds=MEASURES):
        deltas = {k: torch.cat(losses[layer, head, k]) - clean for k in kinds}
        return means_with_intervals(deltas, draws)

    return {
        "all_heads": summary(None, None),
        "layers": [summary(l, None) for l in range(L)],
        "heads": [[summary(l, h, (*MEASURES, "ablation")) for h in range(H)] for l in range(L)],
        "n": len(cases),
        "skipped": skipped,
        "clean_loss": clean.mean().item(),
        "seed": seed,
        "resamples": resamples,
    }


def with_best_head(result: CausalResult, layer: int, head: int) -> CausalStudy:
    """causal_tests' result plus "best_head": {layer, head, antecedent, distractor, ablation}
    (and their _ci) of head (layer, head), e.g. the probe's best head."""
    return {**result, "best_head": {"layer": layer, "head": head, **result["heads"][layer][head]}}
