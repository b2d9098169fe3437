"""Does any attention head find a pronoun's antecedent? Every head, scored against baselines.

Each head's attention from the query (by default the pronoun's last token) to each candidate is
analysis/candidates.py's. A head selects the antecedent (cand@1) when the antecedent's attention
is strictly greater than every distractor's; a tie is a miss.

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

Examples longer than block_size up to the pronoun are read in the model's window and counted
as windowed (analysis/candidates.py). A query word that is not a pronoun ("the", a noun) is
scored all the same, but the result carries a note saying so: a head can then reach 100% or 0%
for reasons that have nothing to do with coreference.

run_probe's result is analysis.results.ProbeResult, each key documented there.

Letters: N examples, L layers, H heads, K candidates.
"""

import torch

from analysis.candidates import (
    CandidateScores,
    candidate_scores,
    position_rules,
    random_rate,
    winners,
)
from analysis.results import (
    Baselines,
    Counts,
    HeadRow,
    HeadScores,
    KindRow,
    KindScores,
    ProbeResult,
    QueryWords,
)
from checks import positive_int
from data.pronouns import DECIDED_BY, PRONOUNS, Example
from data.tokenizer import Tokenizer
from model.gpt import GPT

# Below this many examples, intervals and p-values are false precision, and the reports print
# point values only: a percentile bootstrap of a handful of values has few distinct resamples
# (of one example, a single point), and a permutation test over n items of two candidates cannot
# go below about 2^-n, so even a perfect head on 5 examples has p >= 0.03.
MIN_FOR_STATS = 20
ALPHA = 0.05  # a best head beats chance where the permutation test's p is under this
ONE_SET = ("all",)  # the splits of a probe on one set of examples: a value per split, named "all"


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


def query_words(examples: list[Example]) -> QueryWords:
    """How many examples' query words are not pronouns (compared case-insensitively), of how
    many, and those words, each once in order: {examples, not_pronouns, words}."""
    words = [ex.text[ex.pronoun[0] : ex.pronoun[1]] for ex in examples]
    odd = [w for w in words if w.lower() not in PRONOUNS]
    return {"examples": len(words), "not_pronouns": len(odd), "words": list(dict.fromkeys(odd))}


def head_scores(model: GPT, tokenizer: Tokenizer, examples: list[Example]) -> HeadScores:
    """Every head's cand@1 on one set of examples and the position baselines, with no
    permutations: what training logs as the head forms (train.probe_interval)."""
    scores = candidate_scores(model, tokenizer, examples)
    item_hits = winners(scores) == scores.label[:, None, None]  # (N, L, H)
    hits = item_hits.sum(0)  # (L, H)
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
        "by_kind": _kind_scores(item_hits, scores.decided_by, best),
    }


def _kind_scores(item_hits, decided_by, best) -> dict[str, KindScores]:
    """head_scores' "by_kind": for each kind the items name, the best head's cand@1 on its
    items and the head best on them. item_hits: (N, L, H) bool."""
    out = {}
    for kind in [k for k in DECIDED_BY if k in decided_by]:
        hits = item_hits[torch.tensor([d == kind for d in decided_by])].sum(0)  # (L, H)
        n = sum(d == kind for d in decided_by)
        top = int(hits.flatten().argmax())  # ties: the lowest (layer, head)
        out[kind] = {
            "examples": n,
            "cand_at_1": hits.flatten()[best].item() / n,
            "kind_best": hits.flatten()[top].item() / n,
            "kind_best_head": list(divmod(top, hits.shape[1])),
        }
    return out


def _per_split(splits, dev, test):
    """A value per split: {"dev": dev, "test": test}, or {"all": test} for one set (ONE_SET),
    where dev and test are the same items."""
    return {ONE_SET[0]: test} if splits == ONE_SET else {"dev": dev, "test": test}


def _head_rows(hits_dev, n_dev, hits_test, test_scores, splits) -> list[HeadRow]:
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


def _by_deciding(dev_scores, hits_dev, test_scores, hits_test, best, splits) -> dict[str, KindRow]:
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


def _baselines(dev_scores, test_scores, splits) -> Baselines:
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


def beats_chance(result: dict) -> bool:
    """Whether a probe result's best head beats chance: its permutation test's p under ALPHA (no
    p-value, on too few examples, is no evidence). A result that carries no "p_value" key at all
    (a best head given by hand) is taken as given."""
    if "p_value" not in result:
        return True
    return result["p_value"] is not None and result["p_value"] < ALPHA


def _permutation_test(w_dev, dev_scores, w_test, test_scores, same, permutations, seed, observed):
    """run_probe's {p_value, permutations, seed}: the permutation test's p of `observed` (the
    best-on-dev head's test hit count), or on fewer than MIN_FOR_STATS test items p_value None
    and why (p_value_reason, p_value_needs)."""
    done = {"permutations": permutations, "seed": seed}
    if len(test_scores.label) < MIN_FOR_STATS:
        reason = {"p_value_reason": "too few examples", "p_value_needs": MIN_FOR_STATS}
        return {"p_value": None, **reason, **done}
    null = _null_scores(w_dev, dev_scores, w_test, test_scores, same, permutations, seed)
    above = int((null >= observed).sum())
    return {"p_value": (1 + above) / (1 + permutations), **done}


def _counts(examples, scores: CandidateScores) -> Counts:
    """run_probe's "counts" of one split: its examples, those used, windowed and skipped."""
    return {
        "examples": len(examples),
        "used": len(scores.label),
        "windowed": scores.windowed,
        "antecedent_unseen": scores.antecedent_unseen,
        "skipped_unencodable": scores.skipped_unencodable,
    }


def run_probe(
    model: GPT,
    tokenizer: Tokenizer,
    dev: list[Example],
    test: list[Example] | None = None,
    permutations: int = 1000,
    seed: int = 0,
    test_set: str = "test",
    query: str = "pronoun",
) -> ProbeResult:
    """Score every head on dev and test examples (lists of data.pronouns.Example); `test_set`
    names the test examples in the report ("natural" for the hand-written set); `query` is the
    position attention is read from (analysis.words.QUERY_POSITIONS).

    test=None: one set of examples; the head and the position rule are chosen and scored on the
    same data, "selection" says "same data" (else "dev"), and every value given per split
    has the one split "all" in place of "dev" and "test" (the same items under two names would
    read as a held-out result)."""
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
    observed = hits_test[layer, head]
    counted = zip(splits, (dev, test), (dev_scores, test_scores))  # one set: its one split
    return {
        "best_head": {"layer": layer, "head": head, **{k: heads[best][k] for k in splits}},
        "baselines": _baselines(dev_scores, test_scores, splits),
        "decided_by": _by_deciding(
            dev_scores, item_hits_dev, test_scores, item_hits_test, best, splits
        ),
        **_permutation_test(
            w_dev, dev_scores, w_test, test_scores, same, permutations, seed, observed
        ),
        "selection": "same data" if same else "dev",
        "heads": heads,
        "counts": {split: _counts(exs, scores) for split, exs, scores in counted},
        "block_size": model.config.block_size,
        "test_set": None if same else test_set,  # one set: no test examples to name
        "query": query,
        "query_words": query_words(dev if same else [*dev, *test]),
    }
