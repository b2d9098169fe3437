"""The logit lens at the pronoun: the residual stream at the pronoun's last token, entering each
block and leaving the last one, read through the final LayerNorm and the unembedding as if the
model stopped there (nostalgebraist, "interpreting GPT: the logit lens", 2020). Where in depth
does the model decide what follows "it"? Read on the same items as the probe (analysis/words.py:
encode_item), the true next token being the one after the pronoun in the text; an item whose
text ends at the pronoun is skipped. Points: "embedding" (entering block 0), then "block l" for
the stream leaving block l; the last point is the model's own prediction.
"""

import statistics

import torch

from analysis.batching import BATCH_SIZE, by_length
from analysis.errors import NothingToMeasure
from analysis.items import encode_item
from analysis.results import LensResult
from data.pronouns import Example
from data.tokenizer import Tokenizer
from model.gpt import GPT
from model.hooks import caching, per_layer


def stream_points(n_layer: int) -> list[str]:
    """The hook points of the residual stream entering each block, and leaving the last."""
    return per_layer("hook_resid_pre", n_layer) + [f"blocks.{n_layer - 1}.hook_resid_post"]


@torch.no_grad()
def logit_lens(
    model: GPT, tokenizer: Tokenizer, examples: list[Example], top: int = 5
) -> LensResult:
    """Per point, the true next token's mean probability, median rank (1 = the model's first
    choice) and the share of items where it ranks first; and the `top` tokens at each point for
    the first item, with their probabilities (analysis.results.LensResult). NothingToMeasure
    where no example has a token after its pronoun."""
    cfg = model.config
    items = [
        it
        for it in (encode_item(tokenizer, ex, cfg.block_size) for ex in examples)
        if it is not None and it.next_id is not None
    ]
    if not items:
        raise NothingToMeasure(
            "lens", "no example has a token after its pronoun to predict; the logit lens needs one"
        )
    device = next(model.parameters()).device
    L = cfg.n_layer
    points = stream_points(L)
    ranks, probs = [[] for _ in range(L + 1)], [[] for _ in range(L + 1)]
    first_top = None
    for group in by_length([len(it.ids) for it in items], BATCH_SIZE):
        idx = torch.tensor([items[n].ids for n in group], device=device)  # (B, T)
        with caching(model, points) as cache:
            model.residual(idx)  # it unembeds each point's query row itself: no logits here
        b = torch.arange(len(group), device=device)
        q = torch.tensor([items[n].query for n in group], device=device)
        target = torch.tensor([items[n].next_id for n in group], device=device)
        for i, stream in enumerate(cache[name] for name in points):
            logits = model.unembed(stream[b, q]).float()  # (B, V)
            p = torch.softmax(logits, -1)
            true = logits[b, target]
            ranks[i] += ((logits > true[:, None]).sum(-1) + 1).tolist()
            probs[i] += p[b, target].tolist()
            if 0 in group:
                row = group.index(0)
                values, ids = p[row].topk(min(top, cfg.vocab_size))
                first_top = first_top or [None] * (L + 1)
                first_top[i] = [
                    [tokenizer.decode([t]), v] for t, v in zip(ids.tolist(), values.tolist())
                ]
    first = items[0]
    return {
        "points": ["embedding"] + [f"block {l}" for l in range(L)],
        "mean_probability": [statistics.fmean(p) for p in probs],
        "median_rank": [statistics.median(r) for r in ranks],
        "top1_share": [sum(r == 1 for r in rs) / len(rs) for rs in ranks],
        "n": len(items),
        "skipped": len(examples) - len(items),
        "example": {
            "text": tokenizer.decode(first.ids[: first.query + 1]),
            "next": tokenizer.decode([first.next_id]),
            "top": first_top,
        },
    }
