"""Activation patching and the circuit on your own clean/corrupt prompt pairs (read by
data/prompt_pairs.py), with your own metric: the logit difference at each prompt's last token

    LD = logit(answer's first token) - logit(other's first token),

the metric of analysis/patching.py and analysis/circuit.py, where the lexicon's twins give the
two continuations. Each pair becomes an analysis.patching.Pair: the clean and corrupt prompts'
ids (the same number of tokens, at most the model's block_size, so that position t is the same
place in both), the tokens where the two differ (patching's "antecedent" column; "between" is
what follows them up to the last token, "pronoun" the last token, where the metric is read),
and the two continuations' first tokens, which must differ.
"""

from analysis.circuit import circuit_of_pairs
from analysis.circuit_results import PairsResult
from analysis.errors import ReversedPairs
from analysis.patching import Pair, mean_lds, patching_of_pairs
from data.prompt_pairs import TextPair


def encode_pairs(tokenizer, text_pairs: list[TextPair], block_size: int) -> list[Pair]:
    """The Pairs of `text_pairs`; ValueError naming the pair's line for one the metric cannot
    read (prompts of different token lengths, longer than the window, or identical under the
    tokenizer; continuations whose first tokens are the same)."""
    return [_pair(tokenizer, p, block_size) for p in text_pairs]


def _pair(tokenizer, p: TextPair, block_size: int) -> Pair:
    clean, corrupt = tokenizer.encode(p.clean), tokenizer.encode(p.corrupt)
    where = f"line {p.line}"
    if len(clean) != len(corrupt):
        raise ValueError(
            f"{where}: clean is {len(clean)} tokens and corrupt {len(corrupt)}; patching copies "
            "position by position, so give two prompts of the same token length"
        )
    if len(clean) > block_size:
        raise ValueError(
            f"{where}: the prompts are {len(clean)} tokens, over the model's block_size "
            f"{block_size}; shorten them"
        )
    differ = [i for i, (a, b) in enumerate(zip(clean, corrupt)) if a != b]
    if not differ:
        raise ValueError(f"{where}: clean and corrupt are the same tokens; change a word")
    answer, other = tokenizer.encode(p.answer), tokenizer.encode(p.other)
    if answer[0] == other[0]:
        raise ValueError(
            f"{where}: answer and other begin with the same token "
            f"({tokenizer.decode(answer[:1])!r}), so their logit difference is 0; give "
            "continuations that differ in their first token (a leading space counts)"
        )
    return Pair(clean, corrupt, differ, answer[0], other[0])


def pairs_study(
    model,
    tokenizer,
    text_pairs: list[TextPair],
    patch: bool = True,
    circuit: bool = True,
    seed: int = 0,
    resamples: int = 1000,
) -> PairsResult:
    """How many pairs ("pairs"), with `patch` activation patching's result under "patching"
    (analysis.patching), with `circuit` the circuit's under "circuit" (analysis.circuit; no
    kinds: "by_kind" is empty): analysis.circuit_results.PairsResult. ValueError as
    encode_pairs; ReversedPairs where the corrupt prompts favour the answer as much as the clean
    ones or more (nothing to recover)."""
    pairs = encode_pairs(tokenizer, text_pairs, model.config.block_size)
    clean_ld, corrupt_ld = mean_lds(model, pairs)
    if not clean_ld > corrupt_ld:  # before any patch: every fraction would divide by it
        raise ReversedPairs(clean_ld, corrupt_ld)
    result: PairsResult = {"pairs": len(pairs)}
    if patch:
        result["patching"] = patching_of_pairs(model, pairs, seed, resamples)
    if circuit:
        result["circuit"] = circuit_of_pairs(
            model, pairs, [None] * len(pairs), seed=seed, resamples=resamples
        )
        result["circuit"]["skipped"] = 0
    return result
