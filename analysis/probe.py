"""Does any attention head find a pronoun's antecedent? Every head, scored against baselines.

The query is the pronoun's LAST token: there a causal model has read the whole pronoun and
nothing after it (or, asked for, the token after it or the text's last token: query_token in
analysis/words.py; every candidate token up to the query then counts, the baselines are the
same). A candidate's attention is the sum of the query row's weights over the tokens that
overlap the candidate's characters. A head selects the antecedent (cand@1) when the
antecedent's attention is strictly greater than every distractor's; a tie is a miss.

Honest numbers need honest comparisons, all scored on the same items:
- random: a uniformly drawn candidate, in expectation (the mean of 1/k over items);
- first: the leftmost candidate; nearest: the closest candidate that ends before the pronoun
  starts (candidates after the pronoun are excluded; an item with none counts as a miss);
  every rule counts only the candidates in the model's window, as a head does (one wholly
  before the window cannot be picked, and random draws among the k left);
- position: the best rule that sees positions only ("first", "nearest", the i-th from the left,
  the i-th from the right), chosen on dev, scored on test.
The best head is chosen on dev and reported on test: choosing it on test would inflate it.

Permutation test. Null: the attention carries no information about which candidate is the
antecedent, so the label is exchangeable among each item's candidates. Each of N rounds draws a
new label per item uniformly among its candidates (dev and test alike), chooses the best head
on shuffled dev exactly as for the real labels, and records that head's shuffled-test score;
p = (1 + #{null >= observed}) / (1 + N), observed = the real best-on-dev head's test score.
With one set of examples (test=None) dev and test are the same items under the same shuffle, so
the statistic becomes the max over heads: the selection is still paid for.

Candidates whose tokens all lie after the query stay candidates with attention 0: the model
cannot point at them, and dropping them would make the task easier for heads than for rules.
(data.pronouns.read_jsonl refuses them in a user's file.) No example is too long: one whose text
up to the pronoun is longer than block_size is read in the last block_size tokens up to the
query (analysis.words.model_window), exactly what the model sees there, and is counted as
windowed. A candidate wholly before that window gets attention 0, like one after the query.
A query word that is not a pronoun ("the", a noun) is scored all the same, but the result
carries a note saying so: a head can then reach 100% or 0% for reasons that have nothing to do
with coreference.

Letters: N examples, L layers, H heads, K candidates (padded; antecedent and distractors in text
order), T tokens.
"""

from typing import NamedTuple

import torch

from analysis.batching import BATCH_SIZE, by_length
from analysis.words import encode_item
from checks import positive_int
from data.pronouns import DECIDED_BY, PRONOUNS
from model.hooks import per_layer, run_with_cache

# Below this many examples, intervals and p-values are false precision, and the reports print
# point values only: a percentile bootstrap of a handful of values has few distinct resamples
# (of one example, a single point), and a permutation test over n items of two candidates cannot
# go below about 2^-n, so even a perfect head on 5 examples has p >= 0.03.
MIN_FOR_STATS = 20
ONE_SET = ("all",)  # the splits of a probe on one set of examples: a value per split, named "all"


class CandidateScores(NamedTuple):
    attention: torch.Tensor  # (N, L, H, K) from the query to each candidate, 0 where padded
    valid: torch.Tensor  # (N, K) bool: a real candidate, not padding (real ones come first)
    seen: torch.Tensor  # (N, K) bool: a candidate not wholly before the model's window
    label: torch.Tensor  # (N,) index of the antecedent among the candidates
    first: torch.Tensor  # (N, L, H) attention on the window's token 0, the usual "sink"
    nearest: torch.Tensor  # (N,) index of the closest candidate before the pronoun, -1 if none
    windowed: int  # read in the window before the pronoun: the text up to it exceeds block_size
    antecedent_unseen: int  # windowed, and no token of the antecedent is in the window
    skipped_unencodable: int  # the tokenizer refused the text (a char vocabulary without a letter)
    decided_by: tuple = ()  # (N,) each example's decided_by (data.pronouns.jsonl), None if unsaid


@torch.no_grad()
def candidate_scores(model, tokenizer, examples, query: str = "pronoun") -> CandidateScores:
    """Every head's attention from each example's query position (analysis.words.query_token:
    by default the pronoun) to its candidates (see the module docstring). The model runs once
    per group of equal-length examples: no padding, so no padding can leak into attention."""
    cfg = model.config
    encoded = [encode_item(tokenizer, ex, cfg.block_size, query) for ex in examples]
    kept = [e for e in encoded if e is not None]
    if not kept:
        raise ValueError(
            f"the model's tokenizer cannot encode any of the {len(examples)} examples; give "
            "examples written in the characters of its training text, or a model trained on them"
        )
    N, K = len(kept), max(len(e.tokens) for e in kept)
    attention = torch.zeros(N, cfg.n_layer, cfg.n_head, K)
    first = torch.zeros(N, cfg.n_layer, cfg.n_head)
    device = next(model.parameters()).device
    patterns = per_layer("attn.hook_pattern", cfg.n_layer)
    for batch in by_length([len(e.ids) for e in kept], BATCH_SIZE):
        idx = torch.tensor([kept[n].ids for n in batch], device=device)  # (B, T)
        _, cache = run_with_cache(model, idx, patterns)
        # Keep only each item's query row: (B, H, T, T) per layer -> (B, L, H, T).
        b = torch.arange(len(batch), device=device)
        q = torch.tensor([kept[n].query for n in batch], device=device)
        rows = torch.stack([cache[name][b, :, q].float().cpu() for name in patterns], dim=1)
        for i, n in enumerate(batch):
            row = rows[i]  # (L, H, T)
            first[n] = row[..., 0]
            for k, toks in enumerate(kept[n].tokens):
                attention[n, :, :, k] = row[..., toks].sum(-1)
    valid = torch.zeros(N, K, dtype=torch.bool)
    seen = torch.zeros(N, K, dtype=torch.bool)
    for n, e in enumerate(kept):
        valid[n, : len(e.tokens)] = True
        seen[n, : len(e.tokens)] = torch.tensor([not cut for cut in e.cut_off])
    label = torch.tensor([e.antecedent for e in kept])
    nearest = torch.tensor([e.nearest for e in kept])
    return CandidateScores(
        attention,
        valid,
        seen,
        label,
        first,
        nearest,
        windowed=sum(e.windowed for e in kept),
        antecedent_unseen=sum(e.windowed and not e.tokens[e.antecedent] for e in kept),
        skipped_unencodable=len(examples) - N,
        decided_by=tuple(ex.decided_by for ex, e in zip(examples, encoded) if e is not None),
    )


def winners(scores: CandidateScores) -> torch.Tensor:
    """(N, L, H) index of the candidate with strictly the most attention; -1 where the top ties."""
    masked = scores.attention.masked_fill(~scores.valid[:, None, None, :], float("-inf"))
    top = masked.topk(2, dim=-1)  # every item has an antecedent and at least one distractor
    return torch.where(top.values[..., 0] > top.values[..., 1], top.indices[..., 0], -1)


def position_rules(scores: CandidateScores) -> dict[str, torch.Tensor]:
    """Rule name -> (N,) predicted candidate index (-1: the item has no such candidate). The
    rules count only the candidates in the model's window (scores.seen): one before it is no more
    a rule's to pick than a head's."""
    K = scores.valid.shape[1]
    visible = [torch.nonzero(row).flatten().tolist() for row in scores.seen]  # text order
    pick = lambda at: torch.tensor([v[at] if -len(v) <= at < len(v) else -1 for v in visible])  # noqa: E731
    nearest = torch.where(
        scores.seen[torch.arange(len(visible)), scores.nearest.clamp(min=0)]
        & (scores.nearest >= 0),
        scores.nearest,
        -1,
    )
    rules = {"first": pick(0), "nearest": nearest}
    for i in range(2, K + 1):
        rules[f"left {i}"] = pick(i - 1)
    for i in range(1, K + 1):
        rules[f"right {i}"] = pick(-i)
    return rules


def random_rate(scores: CandidateScores, keep: torch.Tensor | None = None) -> float:
    """A uniformly drawn candidate among those the model sees, in expectation: 1/k where the
    antecedent is one of the k, else 0; over the items where the (N,) bool `keep` holds if given."""
    k = scores.seen.sum(1).double()
    hit = scores.seen[torch.arange(len(scores.label)), scores.label]
    per_item = torch.where(hit & (k > 0), 1 / k.clamp(min=1), 0.0)
    return (per_item if keep is None else per_item[keep]).mean().item()


def _rate(hits: torch.Tensor) -> float:
    return hits.sum().item() / hits.numel()  # exact counts, not a float32 mean


def _null_scores(w_dev, dev_scores, w_test, test_scores, same, permutations, seed):
    """Test hit counts of the best-on-dev head under `permutations` shuffled labellings."""
    gen = torch.Generator().manual_seed(seed)
    w_dev, w_test = w_dev.flatten(1), w_test.flatten(1)  # (N, L*H)
    k_dev, k_test = dev_scores.valid.sum(1), test_scores.valid.sum(1)
    out = []
    for at in range(0, permutations, 100):
        P = min(100, permutations - at)
        # (P, N) labels, each uniform over its item's k candidates
        y_dev = (torch.rand(P, len(k_dev), generator=gen) * k_dev).long()
        y_test = y_dev if same else (torch.rand(P, len(k_test), generator=gen) * k_test).long()
        dev_hits = (w_dev[None] == y_dev[..., None]).sum(1)  # (P, L*H)
        test_hits = (w_test[None] == y_test[..., None]).sum(1)
        best = dev_hits.argmax(1, keepdim=True)  # first maximum, as for the real labels
        out.append(test_hits.gather(1, best).squeeze(1))
    return torch.cat(out)


def _masses(scores: CandidateScores):
    """(L, H) mean attention on the antecedent, on all distractors together, on token 0."""
    n = torch.arange(len(scores.label))
    ante = scores.attention[n, :, :, scores.label]  # (N, L, H)
    distr = scores.attention.sum(-1) - ante  # padding holds 0
    return ante.mean(0), distr.mean(0), scores.first.mean(0)


def query_words(examples) -> dict:
    """How many examples' query words are not pronouns (compared case-insensitively), of how
    many, and those words, each once in order: {examples, not_pronouns, words}."""
    words = [ex.text[ex.pronoun[0] : ex.pronoun[1]] for ex in examples]
    odd = [w for w in words if w.lower() not in PRONOUNS]
    return {"examples": len(words), "not_pronouns": len(odd), "words": list(dict.fromkeys(odd))}


def head_scores(model, tokenizer, examples) -> dict:
    """Every head's cand@1 on one set of examples and the position baselines, with no
    permutations: what training logs as the head forms (train.probe_interval). JSON-ready:
    {"heads": L×H list, "best": cand@1 of the best head, "best_head": [layer, head],
     "baselines": {"random", "first", "nearest"}}."""
    scores = candidate_scores(model, tokenizer, examples)
    hits = (winners(scores) == scores.label[:, None, None]).sum(0)  # (L, H)
    n = len(scores.label)
    best = int(hits.flatten().argmax())  # ties: the lowest (layer, head)
    rules = position_rules(scores)
    return {
        "heads": [[h / n for h in row] for row in hits.tolist()],
        "best": hits.flatten()[best].item() / n,
        "best_head": list(divmod(best, hits.shape[1])),
        "baselines": {
            "random": round(random_rate(scores), 6),
            "first": _rate(rules["first"] == scores.label),
            "nearest": _rate(rules["nearest"] == scores.label),
        },
    }


def _per_split(splits, dev, test):
    """A value per split: {"dev": dev, "test": test}, or {"all": test} for one set (ONE_SET),
    where dev and test are the same items."""
    return {ONE_SET[0]: test} if splits == ONE_SET else {"dev": dev, "test": test}


def _head_rows(hits_dev, n_dev, hits_test, test_scores, splits):
    """run_probe's "heads": each head's cand@1 per split (from (L, H) hit counts) and its mean
    attention masses on the test items."""
    ante, distr, sink = _masses(test_scores)
    L, H = hits_dev.shape
    n_test = len(test_scores.label)
    return [
        {
            "layer": i,
            "head": j,
            **_per_split(splits, hits_dev[i, j].item() / n_dev, hits_test[i, j].item() / n_test),
            "mass_antecedent": round(ante[i, j].item(), 6),
            "mass_distractors": round(distr[i, j].item(), 6),
            "mass_first_token": round(sink[i, j].item(), 6),
        }
        for i in range(L)
        for j in range(H)
    ]


def _by_deciding(dev_scores, hits_dev, test_scores, hits_test, best, splits):
    """run_probe's "decided_by": for each kind the test items name, their count, the best head's
    cand@1 on them, the random baseline, and the head best on dev's items of that kind (None
    where dev has none) with its dev and test cand@1. hits_*: (N, L, H) bool."""
    out = {}
    for kind in [k for k in DECIDED_BY if k in test_scores.decided_by]:
        in_test = torch.tensor([d == kind for d in test_scores.decided_by])
        in_dev = torch.tensor([d == kind for d in dev_scores.decided_by], dtype=torch.bool)
        test_rate = hits_test[in_test].double().mean(0)  # (L, H)
        row = {
            "examples": int(in_test.sum()),
            "best_head": test_rate.flatten()[best].item(),
            "random": random_rate(test_scores, in_test),
            "kind_best": None,
        }
        if in_dev.any():
            dev_rate = hits_dev[in_dev].double().mean(0)
            top = int(dev_rate.flatten().argmax())  # ties: the lowest (layer, head)
            layer, head = divmod(top, dev_rate.shape[1])
            row["kind_best"] = {
                "layer": layer,
                "head": head,
                **_per_split(
                    splits, dev_rate.flatten()[top].item(), test_rate.flatten()[top].item()
                ),
            }
        out[kind] = row
    return out


def _baselines(dev_scores, test_scores, splits):
    """run_probe's "baselines": random, first, nearest, and the position rule best on dev, each
    a value per split (_per_split)."""
    rules_dev, rules_test = position_rules(dev_scores), position_rules(test_scores)
    rule_dev = {name: _rate(p == dev_scores.label) for name, p in rules_dev.items()}
    rule = max(rule_dev, key=rule_dev.get)  # dicts keep order: ties go to the earlier rule

    def baseline(name):
        return _per_split(splits, rule_dev[name], _rate(rules_test[name] == test_scores.label))

    return {
        "random": _per_split(splits, random_rate(dev_scores), random_rate(test_scores)),
        "first": baseline("first"),
        "nearest": baseline("nearest"),
        "position": {"rule": rule, **baseline(rule)},
    }


def run_probe(
    model, tokenizer, dev, test=None, permutations=1000, seed=0, test_set="test", query="pronoun"
) -> dict:
    """Score every head on dev and test examples (lists of data.pronouns.Example); `test_set`
    names the test examples in the report ("natural" for the hand-written set); `query` is the
    position attention is read from (analysis.words.QUERY_POSITIONS).

    test=None: one set of examples; the head and the position rule are chosen and scored on the
    same data, "selection" says "same data" (else "dev"), and every value given per split below
    has the one split "all" in place of "dev" and "test" (the same items under two names would
    read as a held-out result). Returns a JSON-ready dict:
      best_head  {layer, head, <split>...}: chosen by dev cand@1, ties to the lowest (layer, head)
      baselines  {random, first, nearest, position}: each per split; position adds its "rule"
      decided_by {kind: {examples, best_head, random, kind_best}} for each kind of item the test
                 examples name (data.pronouns.jsonl DECIDED_BY; {} where none do): best_head is
                 the best head's test cand@1 on them; kind_best {layer, head, <split>...} the
                 head best on dev's items of that kind, None where dev has none
      p_value    the permutation test's p; None (no test run) when fewer than MIN_FOR_STATS
                 examples are scored, and then p_value_reason is "too few examples" and
                 p_value_needs MIN_FOR_STATS
      permutations, seed, selection
      heads      one {layer, head, <split>..., mass_antecedent, mass_distractors,
                 mass_first_token} per head, layer-major; masses are means over test items
      counts     per split: {examples, used, windowed, antecedent_unseen, skipped_unencodable}:
                 windowed items were read in the last block_size tokens up to the pronoun, and
                 of those antecedent_unseen lost their antecedent from that window
      block_size the model's
      test_set   the name of the test examples (None for one set)
      query      the position attention was read from
      query_words {examples, not_pronouns, words}: the query words that are not pronouns
                 (for those the probe measures where that word looks, not coreference)"""
    positive_int("permutations", permutations)
    same = test is None
    splits = ONE_SET if same else ("dev", "test")
    dev_scores = candidate_scores(model, tokenizer, dev, query)
    test_scores = dev_scores if same else candidate_scores(model, tokenizer, test, query)
    w_dev, w_test = winners(dev_scores), winners(test_scores)
    item_hits_dev = w_dev == dev_scores.label[:, None, None]  # (N, L, H)
    item_hits_test = w_test == test_scores.label[:, None, None]
    hits_dev, hits_test = item_hits_dev.sum(0), item_hits_test.sum(0)  # (L, H)
    best = int(hits_dev.flatten().argmax())  # ties: the lowest (layer, head)
    layer, head = divmod(best, hits_dev.shape[1])

    heads = _head_rows(hits_dev, len(dev_scores.label), hits_test, test_scores, splits)
    p_value = {
        "p_value": None,
        "p_value_reason": "too few examples",
        "p_value_needs": MIN_FOR_STATS,
    }
    if len(test_scores.label) >= MIN_FOR_STATS:
        null = _null_scores(w_dev, dev_scores, w_test, test_scores, same, permutations, seed)
        above = int((null >= hits_test[layer, head]).sum())
        p_value = {"p_value": (1 + above) / (1 + permutations)}
    counted = (
        ((ONE_SET[0], dev, dev_scores),)
        if same
        else (("dev", dev, dev_scores), ("test", test, test_scores))
    )
    return {
        "best_head": {"layer": layer, "head": head, **{k: heads[best][k] for k in splits}},
        "baselines": _baselines(dev_scores, test_scores, splits),
        "decided_by": _by_deciding(
            dev_scores, item_hits_dev, test_scores, item_hits_test, best, splits
        ),
        **p_value,
        "permutations": permutations,
        "seed": seed,
        "selection": "same data" if same else "dev",
        "heads": heads,
        "counts": {
            split: {
                "examples": len(exs),
                "used": len(scores.label),
                "windowed": scores.windowed,
                "antecedent_unseen": scores.antecedent_unseen,
                "skipped_unencodable": scores.skipped_unencodable,
            }
            for split, exs, scores in counted
        },
        "block_size": model.config.block_size,
        "test_set": None if same else test_set,  # one set: no test examples to name
        "query": query,
        "query_words": query_words(dev if same else [*dev, *test]),
    }
