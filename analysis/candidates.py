"""Every head's attention from a labelled example's query position to each of its candidates,
and the rules that pick a candidate by position alone: what the coreference probe
(analysis/probe.py) and the model's answer (analysis/answer.py) score, on the same items.

The query is the pronoun's LAST token: there a causal model has read the whole pronoun and
nothing after it (or, asked for, the token after it or the text's last token: query_token in
analysis/words.py; every candidate token up to the query then counts, the rules are the
same). A candidate's attention is the sum of the query row's weights over the tokens that
overlap the candidate's characters. A head selects a candidate when its attention is strictly
greater than every other's (winners); a tie selects none.

Candidates whose tokens all lie after the query stay candidates with attention 0: the model
cannot point at them, and dropping them would make the task easier for heads than for rules.
(data.pronouns.read_jsonl refuses them in a user's file.) No example is too long: one whose text
up to the pronoun is longer than block_size is read in the last block_size tokens up to the
query (analysis.words.model_window), exactly what the model sees there, and is counted as
windowed. A candidate wholly before that window gets attention 0, like one after the query, and
no position rule picks it.

Letters: N examples, L layers, H heads, K candidates (padded; antecedent and distractors in text
order), T tokens.
"""

from typing import NamedTuple

import torch

from analysis.batching import BATCH_SIZE, by_length
from analysis.items import encode_item
from data.pronouns import Example
from data.tokenizer import Tokenizer
from model.gpt import GPT
from model.hooks import caching, per_layer


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
def candidate_scores(
    model: GPT, tokenizer: Tokenizer, examples: list[Example], query: str = "pronoun"
) -> CandidateScores:
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
        with caching(model, patterns) as cache:
            model.residual(idx)  # the patterns are all it reads: no unembedding
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

    def pick(at):
        return torch.tensor([v[at] if -len(v) <= at < len(v) else -1 for v in visible])

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
