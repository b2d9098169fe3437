"""The model's own answer: which candidate does its prediction treat the pronoun as?

The probe asks where one head looks; this asks what the model's output says. Two readings, each
needing nothing but the example (its text and spans: no word list, so a user's file and GPT-2
are read alike). Each puts every candidate in the pronoun's place, as its phrase: "the" and the
candidate's text ("it" -> "the dog": the spans are bare nouns), with a capital where the pronoun
has one ("It" -> "The dog"); a candidate written with a capital (a name) goes in as written.

substitution (Trinh & Le 2018; lm-eval's wsc273 task, "partial scoring"): the text after the
  pronoun, the continuation, is scored after each phrase: its log-probability, the SUM over its
  tokens of log p(token | all before it). The answer is the candidate under which the
  continuation is most probable. Summed, as lm-eval's `acc` is, because every candidate is
  followed by the same string: the sum is that string's log-probability under each context. A
  per-token mean would differ only where the tokenizer splits the string differently after one
  phrase, and would then compare rates over different token counts.
closeness: the candidate whose phrase leaves the model expecting what it expects after the
  pronoun: the next-token distribution at the phrase's last token closest to the one at the
  pronoun in the original text, smallest KL(p_pronoun || p_phrase). KL from the pronoun's side
  weighs the tokens the model expects after the pronoun: a phrase is penalised for making them
  unlikely, less for expecting something else besides.

Where a token holds both the phrase's last character and the next, it is the phrase's: both
methods read there and the continuation is scored from the token after it. An item whose top
score ties has no answer and is a miss, as a tie is for a head; substitution ties on every item
whose text ends at the pronoun (nothing to score). An item is skipped (and counted) when the
tokenizer cannot encode its text or one of its substitutions.

Window: every token is predicted from the last block_size tokens up to it (analysis.words.
model_window), what the model reads there: a text that fits is one pass, and beyond block_size
each further token is its own window. The pronoun's distribution is read in the probe's window.

Reported like a head, on the same items: cand@1 of both methods and of the best head, the
probe's baselines (random, first, nearest: analysis/probe.py), each kind of item apart
(decided_by), and how often the answer and the head's pick agree (where either has no pick they
do not), with 95% percentile bootstrap intervals (analysis/bootstrap.py) on a set of at least
MIN_FOR_STATS items.

Letters: N examples, K candidates (padded; text order), V vocabulary.
"""

from typing import NamedTuple

import torch

from analysis.batching import BATCH_SIZE, by_length
from analysis.bootstrap import means_with_intervals, resample
from analysis.errors import NothingToMeasure
from analysis.items import encode_item
from analysis.probe import MIN_FOR_STATS, candidate_scores, position_rules, random_rate, winners
from analysis.results import AnswerResult, AnswerRow
from analysis.words import model_window, token_spans
from data.pronouns import DECIDED_BY, Example
from data.tokenizer import Tokenizer
from model.gpt import GPT

METHODS = ("substitution", "closeness")
DETERMINER = "the"  # the spans are bare nouns; a pronoun stands for a whole noun phrase
# Examples read at once: their (V,) rows for closeness are held until their KL is taken, so
# memory stays bounded for a file of any size (a default set's 300 are read at once).
EXAMPLES_AT_ONCE = 512


class Substituted(NamedTuple):
    ids: list[int]  # the whole text with the phrase in the pronoun's place
    last: int  # index of the token holding the phrase's last character


def phrase(example: Example, span: tuple[int, int]) -> str:
    """What stands in the pronoun's place for the candidate at `span` (see the docstring)."""
    word = example.text[span[0] : span[1]]
    if word[0].isupper():  # a name, or a noun written with a capital: as written
        return word
    capital = example.text[example.pronoun[0]].isupper()
    return f"{DETERMINER.capitalize() if capital else DETERMINER} {word}"


def substitute(tokenizer: Tokenizer, example: Example, span: tuple[int, int]) -> Substituted | None:
    """The example with the candidate at `span` in the pronoun's place, or None when the
    tokenizer cannot encode it."""
    start, end = example.pronoun
    put = phrase(example, span)
    text = example.text[:start] + put + example.text[end:]
    try:
        ids, starts = tokenizer.encode_with_offsets(text)
    except ValueError:
        return None
    boundary = start + len(put)  # the continuation's first character
    last = max(i for i, (a, _) in enumerate(token_spans(text, starts)) if a < boundary)
    return Substituted(ids, last)


def _requests(item, subs, block_size):
    """What the model must read for one example: (ids, positions, targets) triples, targets None
    where the whole log-probability row is wanted, each tagged (k, method): k -1 is the
    original at the pronoun."""
    out = [((item.ids, [item.query], None), (-1, "closeness"))]
    for k, sub in enumerate(subs):
        n = len(sub.ids)
        start, end = model_window(n, sub.last, block_size)
        out.append(((sub.ids[start:end], [sub.last - start], None), (k, "closeness")))
        windows: dict[int, list[int]] = {}  # window start -> the positions predicted there
        for p in range(sub.last, n - 1):  # position p predicts token p + 1, the continuation
            windows.setdefault(model_window(n, p, block_size)[0], []).append(p)
        for start, positions in windows.items():
            end = model_window(n, positions[0], block_size)[1]
            local = [p - start for p in positions]
            targets = [sub.ids[p + 1] for p in positions]
            out.append(((sub.ids[start:end], local, targets), (k, "substitution")))
    return out


def _run(model, requests):
    """For each (ids, positions, targets): the (P,) log-probabilities of the targets at those
    positions, or with targets None the (P, V) rows. Equal-length windows share a batch."""
    device = next(model.parameters()).device
    out = [None] * len(requests)
    for batch in by_length([len(ids) for ids, _, _ in requests], BATCH_SIZE):
        idx = torch.tensor([requests[r][0] for r in batch], device=device)  # (B, T)
        logits = model(idx)  # (B, T, V)
        for b, r in enumerate(batch):
            _, positions, targets = requests[r]
            rows = logits[b, positions].float().log_softmax(-1)  # (P, V)
            if targets is not None:
                rows = rows.gather(1, torch.tensor(targets, device=device)[:, None])[:, 0]
            out[r] = rows.double().cpu()
    return out


def _kl(log_p, log_q):
    """KL(p || q) of two log-probability rows; terms where p is 0 add nothing."""
    p = log_p.exp()
    return torch.where(p > 0, p * (log_p - log_q), 0.0).sum().item()


def _pick(scores):
    """(N,) index of the candidate with strictly the highest score; -1 where the top ties."""
    top = scores.topk(2, dim=1)
    return torch.where(top.values[:, 0] > top.values[:, 1], top.indices[:, 0], -1)


def answers(
    model: GPT, tokenizer: Tokenizer, examples: list[Example]
) -> tuple[dict[str, torch.Tensor], list[Example]]:
    """({method: (N,) picked candidate index in text order, -1 for none}, the examples read):
    each method's answer on the examples the tokenizer can encode with every substitution.
    EXAMPLES_AT_ONCE at a time: a file of any size holds only their rows in memory."""
    kept, picks = [], {method: [] for method in METHODS}
    for at in range(0, len(examples), EXAMPLES_AT_ONCE):
        picked, part = _answers_of(model, tokenizer, examples[at : at + EXAMPLES_AT_ONCE])
        kept += part
        for method in METHODS:
            picks[method].append(picked[method])
    if not kept:
        raise NothingToMeasure(
            "answer",
            f"the model's tokenizer cannot encode any of the "
            f"{len(examples)} examples with a candidate in the pronoun's place",
        )
    return {method: torch.cat(picks[method]) for method in METHODS}, kept


def _answers_of(model, tokenizer, examples):
    """answers() for a few examples, ({method: picks}, kept) with none of them raising."""
    block_size = model.config.block_size
    kept, requests, tags = [], [], []
    for ex in examples:
        item = encode_item(tokenizer, ex, block_size)
        spans = sorted([ex.antecedent, *ex.distractors])  # text order, as encode_item's
        subs = [substitute(tokenizer, ex, span) for span in spans]
        if item is None or None in subs:
            continue
        for request, (k, method) in _requests(item, subs, block_size):
            requests.append(request)
            tags.append((len(kept), k, method))
        kept.append(ex)
    K = max((len(ex.distractors) + 1 for ex in kept), default=2)
    logprob = torch.full((len(kept), K), float("-inf"), dtype=torch.float64)
    closeness = torch.full((len(kept), K), float("-inf"), dtype=torch.float64)  # -KL
    for ex_n, ex in enumerate(kept):
        logprob[ex_n, : len(ex.distractors) + 1] = 0.0  # an empty continuation scores 0
    rows, pronoun = {}, {}
    for (n, k, method), value in zip(tags, _run(model, requests)):
        if method == "substitution":
            logprob[n, k] += value.sum()
        elif k < 0:
            pronoun[n] = value[0]
        else:
            rows[n, k] = value[0]
    for (n, k), row in rows.items():
        closeness[n, k] = -_kl(pronoun[n], row)
    return {"substitution": _pick(logprob), "closeness": _pick(closeness)}, kept


def _rate(hits):
    return hits.sum().item() / hits.numel()  # exact counts, not a float32 mean


def _row(hits, agree, no_answer, scores, keep, resamples, seed) -> AnswerRow:
    """One line of model_answer's result: the items where the (N,) bool `keep` holds."""
    rules = position_rules(scores)
    n = int(keep.sum())
    row = {
        "examples": n,
        "cand_at_1": {name: _rate(v[keep]) for name, v in hits.items()},
        "agreement": {name: _rate(v[keep]) for name, v in agree.items()},
        "no_answer": {name: int(v[keep].sum()) for name, v in no_answer.items()},
        "baselines": {
            "random": round(random_rate(scores, keep), 6),
            "first": _rate((rules["first"] == scores.label)[keep]),
            "nearest": _rate((rules["nearest"] == scores.label)[keep]),
        },
    }
    if n >= MIN_FOR_STATS:
        draws = resample(n, resamples, seed)
        for key, values in (("cand_at_1", hits), ("agreement", agree)):
            summary = means_with_intervals({k: v[keep].double() for k, v in values.items()}, draws)
            row[f"{key}_ci"] = {name: summary[f"{name}_ci"] for name in values}
    return row


@torch.no_grad()
def model_answer(
    model: GPT,
    tokenizer: Tokenizer,
    examples: list[Example],
    head: tuple[int, int],
    query: str = "pronoun",
    seed: int = 0,
    resamples: int = 1000,
) -> AnswerResult:
    """Both methods' answers (see the module docstring) on labelled examples, beside the head
    `head` (layer, index; e.g. the probe's best) read at `query` (analysis.words.QUERY_POSITIONS),
    each key documented at analysis.results.AnswerResult. NothingToMeasure when no example can
    be read."""
    picks, kept = answers(model, tokenizer, examples)
    scores = candidate_scores(model, tokenizer, kept, query)  # every kept example encodes
    layer, index = head
    head_pick = winners(scores)[:, layer, index]  # (N,)
    hits = {**{m: picks[m] == scores.label for m in METHODS}, "head": head_pick == scores.label}
    agree = {m: (picks[m] == head_pick) & (picks[m] >= 0) for m in METHODS}
    no_answer = {m: picks[m] < 0 for m in METHODS}
    every = torch.ones(len(kept), dtype=torch.bool)
    kinds = {}
    for kind in [k for k in DECIDED_BY if k in scores.decided_by]:
        keep = torch.tensor([d == kind for d in scores.decided_by])
        kinds[kind] = _row(hits, agree, no_answer, scores, keep, resamples, seed)
    return {
        "methods": list(METHODS),
        "head": {"layer": layer, "head": index},
        "all": _row(hits, agree, no_answer, scores, every, resamples, seed),
        "decided_by": kinds,
        "n": len(kept),
        "skipped": len(examples) - len(kept),
        "seed": seed,
        "resamples": resamples,
    }
