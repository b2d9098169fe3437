"""Activation patching at the pronoun: which components carry the antecedent to it?

Each labelled example gets a corrupted twin of the same token length: its antecedent replaced by
another noun of the lexicon (data/pronouns/lexicon) of the same kind that takes the same pronoun
("the owl ... it" -> "the crow ... it"), one token for one token, so every other token is the
same. Each noun has its own doings ("hooted", "cawed"): the clean continuation's first token
(the text's token after the pronoun) and the twin's (its first doing whose first token differs)
give the metric, the logit difference at the pronoun,

    LD = logit(clean next) - logit(twin's next),

and a patch's recovered fraction is (mean LD patched - mean LD corrupt) / (mean LD clean - mean
LD corrupt): 0 is the corrupted run, 1 the clean one (means over the examples, as in the
indirect-object-identification work; a ratio of per-example values blows up where one is
near 0). An example whose antecedent is no lexicon noun, or with no twin of its token length
and another continuation, is counted and skipped.

Patched from the clean run into the corrupted run, one at a time, through the model's hook
points (model.hooks):
  heads     each head's output at the pronoun (hook_z; an L x H grid);
  stream    the residual stream entering each block and leaving the last (L + 1 rows) at the
            antecedent's tokens, the tokens between it and the pronoun, and the pronoun (the
            tokens before the antecedent are the same in both runs, so patching them does
            nothing): causal tracing, positions aligned by their role in the sentence;
  mlps      each MLP's output (hook_mlp_out) at the same three columns (L rows).
Intervals: 95% percentile bootstrap over examples (the same resamples for every cell).
"""

import random
from typing import NamedTuple

import torch

from analysis.batching import BATCH_SIZE, by_length
from analysis.bootstrap import interval, resample
from analysis.circuit_results import Cell, PatchingResult
from analysis.errors import NothingToMeasure
from analysis.interventions import replace_where
from analysis.items import encode_item
from analysis.lens import stream_points
from analysis.probe import MIN_FOR_STATS
from data.pronouns import Example
from data.pronouns.lexicon import lexicon
from data.tokenizer import Tokenizer
from model.gpt import GPT
from model.hooks import hooks, per_layer, run_with_cache

COLUMNS = ("antecedent", "between", "pronoun")


class Pair(NamedTuple):
    clean: list[int]  # ids up to and including the pronoun's last token
    corrupt: list[int]  # the same with the antecedent's tokens replaced
    antecedent: list[int]  # indices of the antecedent's tokens
    clean_next: int  # the clean continuation's first token
    corrupt_next: int  # the twin's continuation's first token


def _twins(word):
    """(form, plural?, nouns of the same kind and pronoun) for an antecedent word, or None."""
    lower = word.lower()
    for noun in lexicon().nouns:
        for form, plural in ((noun.word, False), (noun.plural, True)):
            if form == lower:
                same = [
                    n
                    for n in lexicon().nouns
                    if n is not noun
                    and n.kind == noun.kind
                    and n.pronoun(plural) == noun.pronoun(plural)
                    and (n.plural or not plural)
                ]
                return plural, same
    return None


class NoTwins(NothingToMeasure):
    """No example has a corrupted twin: there is nothing to patch. `tokenizer`: the model's
    tokenizer kind (under "char" no example ever has one: every continuation starts with a
    space)."""

    reason = "no twins"

    def __init__(self, tokenizer: str, message: str):
        super().__init__("patching", message)
        self.tokenizer = tokenizer


def make_pair(
    tokenizer: Tokenizer, example: Example, block_size: int, rng: random.Random
) -> Pair | None:
    """The example and a corrupted twin as a Pair, or None (see the module docstring)."""
    clean = encode_item(tokenizer, example, block_size)
    if clean is None or clean.next_id is None or not clean.tokens[clean.antecedent]:
        return None
    s, e = example.antecedent
    found = _twins(example.text[s:e])
    if found is None:
        return None
    plural, nouns = found
    rng.shuffle(nouns)
    for noun in nouns[:40]:
        form = noun.plural if plural else noun.word
        if example.text[s].isupper():
            form = form[0].upper() + form[1:]
        shift = len(form) - (e - s)

        def moved(span, shift=shift, e=e):  # this pass's shift and end, bound now
            return (span[0] + shift, span[1] + shift) if span[0] >= e else span

        twin = Example(
            example.text[:s] + form + example.text[e:],
            moved(example.pronoun),
            (s, s + len(form)),
            tuple(moved(d) for d in example.distractors),
        )
        other = encode_item(tokenizer, twin, block_size)
        if other is None or other.query != clean.query:
            continue
        a, b = clean.ids[: clean.query + 1], other.ids[: other.query + 1]
        where = clean.tokens[clean.antecedent]
        if other.tokens[other.antecedent] != where or any(
            x != y for i, (x, y) in enumerate(zip(a, b)) if i not in where
        ):
            continue
        nexts = [tokenizer.encode(" " + d.split()[0])[0] for d in noun.doings]
        nexts = [t for t in nexts if t != clean.next_id]
        if nexts:
            return Pair(a, b, where, clean.next_id, nexts[0])
    return None


def _ld(logits, pairs):
    """(B,) logit difference at the last position: clean next - twin's next."""
    last = logits[:, -1].float()
    b = torch.arange(len(pairs))
    return (
        (last[b, [p.clean_next for p in pairs]] - last[b, [p.corrupt_next for p in pairs]])
        .double()
        .cpu()
    )


@torch.no_grad()
def mean_lds(model: GPT, pairs: list[Pair]) -> tuple[float, float]:
    """(mean LD clean, mean LD corrupt) over `pairs`: the gap every recovered fraction divides
    by, clean - corrupt, before any patch is made."""
    device = next(model.parameters()).device
    clean, corrupt = [], []
    for group in by_length([len(p.clean) for p in pairs], BATCH_SIZE):
        batch = [pairs[i] for i in group]
        clean.append(_ld(model(torch.tensor([p.clean for p in batch], device=device)), batch))
        corrupt.append(_ld(model(torch.tensor([p.corrupt for p in batch], device=device)), batch))
    return torch.cat(clean).mean().item(), torch.cat(corrupt).mean().item()


def _positions(pairs, T):
    """(3, B, T) bool: each pair's antecedent tokens, the tokens between, and the pronoun."""
    out = torch.zeros(len(COLUMNS), len(pairs), T, dtype=torch.bool)
    for b, p in enumerate(pairs):
        out[0, b, p.antecedent] = True
        out[1, b, max(p.antecedent, default=T - 2) + 1 : T - 1] = True  # none: nothing between
        out[2, b, T - 1] = True
    return out


class Patched(NamedTuple):
    """Logit differences of one group of pairs (B of them): the clean and corrupted runs, and
    the corrupted run with one activation patched in from the source run."""

    clean: torch.Tensor  # (B,)
    corrupt: torch.Tensor  # (B,)
    heads: torch.Tensor  # (L, H, B): one head's output (hook_z) at the pronoun
    stream: torch.Tensor  # (L + 1, 3, B): the stream at a point, at one column's positions
    mlps: torch.Tensor  # (L, 3, B): one MLP's output (hook_mlp_out) at one column's positions


@torch.no_grad()
def patch_group(model: GPT, pairs: list[Pair], source: str = "clean") -> Patched:
    """Every patch of the module docstring, for pairs of one token length. source="corrupt"
    patches the corrupted run into itself (a check: nothing moves)."""
    cfg, device = model.config, next(model.parameters()).device
    clean = torch.tensor([p.clean for p in pairs], device=device)
    corrupt = torch.tensor([p.corrupt for p in pairs], device=device)
    B, T = clean.shape
    L, H = cfg.n_layer, cfg.n_head
    zs, mlps, stream = (per_layer("attn.hook_z", L), per_layer("hook_mlp_out", L), stream_points(L))
    names = zs + mlps + stream
    logits, clean_cache = run_with_cache(model, clean, names)
    ld_clean = _ld(logits, pairs)
    logits, corrupt_cache = run_with_cache(model, corrupt, names)
    ld_corrupt = _ld(logits, pairs)
    cache = clean_cache if source == "clean" else corrupt_cache

    def patched(name, where):
        """LD of the corrupted run with point `name` taken from `cache` where `where` is True."""
        if not where.any():  # nothing to patch: the corrupted run itself
            return ld_corrupt
        with hooks(model, {name: replace_where(where, cache[name])}):
            return _ld(model(corrupt), pairs)

    at_pronoun = torch.zeros(H, B, T, H, dtype=torch.bool, device=device)  # per head: (B, T, H)
    for h in range(H):
        at_pronoun[h, :, T - 1, h] = True
    positions = _positions(pairs, T).to(device)  # (3, B, T)
    columns = range(len(COLUMNS))
    return Patched(
        ld_clean,
        ld_corrupt,
        heads=torch.stack([torch.stack([patched(z, at_pronoun[h]) for h in range(H)]) for z in zs]),
        stream=torch.stack(
            [torch.stack([patched(p, positions[c]) for c in columns]) for p in stream]
        ),
        mlps=torch.stack([torch.stack([patched(m, positions[c]) for c in columns]) for m in mlps]),
    )


def recovered(patched: torch.Tensor, clean: torch.Tensor, corrupt: torch.Tensor) -> torch.Tensor:
    """(mean patched - mean corrupt) / (mean clean - mean corrupt), means over the last
    dimension (the examples; a leading dimension holds bootstrap resamples)."""
    return (patched.mean(-1) - corrupt.mean(-1)) / (clean.mean(-1) - corrupt.mean(-1))


def twin_pairs(
    tokenizer: Tokenizer, examples: list[Example], block_size: int, seed: int, needed_by: str
) -> tuple[list[Pair], list[Example]]:
    """Each example's corrupted twin as a Pair (make_pair, one seeded draw for the set), and the
    examples that gave one; NoTwins, saying what `needed_by` needs, where none does."""
    rng = random.Random(seed)
    made = [(make_pair(tokenizer, ex, block_size, rng), ex) for ex in examples]
    made = [(pair, ex) for pair, ex in made if pair is not None]
    if made:
        pairs, kept = zip(*made)
        return list(pairs), list(kept)
    kind = getattr(tokenizer, "kind", "")
    if kind == "char":  # every doing's first token is its space
        raise NoTwins(
            kind,
            "no example has a corrupted twin under this model's char "
            "tokenizer: each continuation's first token is a space, the same for "
            f"every noun; {needed_by} needs a tokenizer with word tokens (bpe, gpt2)",
        )
    raise NoTwins(
        kind,
        f"no example has a corrupted twin under this model's {kind} tokenizer "
        "(an antecedent from the lexicon, a same-kind noun of its token length, "
        f"and another continuation); {needed_by} needs some",
    )


def activation_patching(
    model: GPT,
    tokenizer: Tokenizer,
    examples: list[Example],
    seed: int = 0,
    resamples: int = 1000,
) -> PatchingResult:
    """The recovered fraction of every head's output, the residual stream and each MLP's
    output, patched one at a time (see the module docstring), each key documented at
    analysis.circuit_results.PatchingResult. NoTwins where no example has a twin."""
    pairs, _ = twin_pairs(tokenizer, examples, model.config.block_size, seed, "activation patching")
    return patching_of_pairs(model, pairs, seed, resamples, skipped=len(examples) - len(pairs))


def patching_of_pairs(
    model: GPT, pairs: list[Pair], seed: int = 0, resamples: int = 1000, skipped: int = 0
) -> PatchingResult:
    """activation_patching's result for Pairs made elsewhere (a user's own: analysis/user_pairs);
    `skipped`: the examples that gave none."""
    parts = [
        patch_group(model, [pairs[i] for i in group])
        for group in by_length([len(p.clean) for p in pairs], BATCH_SIZE)
    ]
    clean, corrupt, heads, stream, mlps = (torch.cat(values, -1) for values in zip(*parts))
    draws = resample(len(clean), resamples, seed)

    def cell(values) -> Cell:
        point = recovered(values, clean, corrupt).item()
        if len(clean) < MIN_FOR_STATS:
            return {"recovered": point}
        boot = recovered(values[draws], clean[draws], corrupt[draws])  # (resamples,)
        return {"recovered": point, "recovered_ci": interval(boot)}

    return {
        "heads": [[cell(heads[l, h]) for h in range(heads.size(1))] for l in range(heads.size(0))],
        "stream": [
            [cell(stream[i, c]) for c in range(len(COLUMNS))] for i in range(stream.size(0))
        ],
        "mlps": [[cell(mlps[l, c]) for c in range(len(COLUMNS))] for l in range(mlps.size(0))],
        "points": ["embedding"] + [f"block {l}" for l in range(heads.size(0))],
        "columns": list(COLUMNS),
        "clean_ld": clean.mean().item(),
        "corrupt_ld": corrupt.mean().item(),
        "n": len(pairs),
        "skipped": skipped,
        "seed": seed,
        "resamples": resamples,
    }
