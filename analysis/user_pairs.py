"""Activation patching and the circuit on your own clean/corrupt prompt pairs (read by
data/prompt_pairs.py), with your own metric: the logit difference at each prompt's last token

    LD = logit(answer's first token) - logit(other's first token),

the metric of analysis/patching.py and analysis/circuit.py, where the lexicon's twins give the
two continuations. Each pair becomes an analysis.patching.Pair: the clean and corrupt prompts'
ids (the same number of tokens, at most the model's block_size, so that position t is the same
place in both), the tokens where the two differ, and the two continuations' first tokens, which
must differ.

Your pairs say nothing of antecedents, so the positions are named by what they are (COLUMNS):
"changed", the tokens where clean and corrupt differ before the last token; "between", what
follows them up to the last token; "last", the last token, where the metric is read. A pair may
differ in its last token too (a gender swap: "... so he" / "... so she"): that token is the
"last" column's, never the "changed" one's, and "last_changed" counts such pairs. The circuit's
embedding node at every token that differs, the last included, is analysis.choice.CHANGED.

A circuit is searched only where the pairs can pass the bar the built-in sets pass
(analysis/circuit.py): at least MIN_FOR_STATS pairs, so that the gap clean - corrupt has a 95%
interval, then a gap of at least its MIN_GAP with the interval above 0; on fewer pairs the
result says so under "circuit_skipped" (edges ranked on three pairs are noise, and would be
drawn as if they were a finding).
"""

from analysis.choice import CHANGED
from analysis.circuit import circuit_of_pairs
from analysis.circuit_results import PairsResult
from analysis.errors import ReversedPairs
from analysis.patching import Pair, mean_lds, patching_of_pairs
from analysis.probe import MIN_FOR_STATS
from data.prompt_pairs import TextPair

COLUMNS = ("changed", "between", "last")  # patching's columns on your pairs
TOO_FEW = "too few pairs"  # circuit_skipped's reason


def encode_pairs(tokenizer, text_pairs: list[TextPair], block_size: int) -> list[Pair]:
    """The Pairs of `text_pairs`, each one's `antecedent` every token where the prompts differ;
    ValueError naming the pair's line for one the metric cannot read (prompts of different token
    lengths, longer than the window, or identical under the tokenizer; continuations whose first
    tokens are the same)."""
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


def before_last(pair: Pair) -> Pair:
    """The pair as patching reads it: its changed tokens less the last one, which is the "last"
    column's."""
    return pair._replace(antecedent=[i for i in pair.antecedent if i < len(pair.clean) - 1])


def pairs_study(
    model,
    tokenizer,
    text_pairs: list[TextPair],
    patch: bool = True,
    circuit: bool = True,
    seed: int = 0,
    resamples: int = 1000,
) -> PairsResult:
    """How many pairs ("pairs") and how many differ in their last token ("last_changed"); with
    `patch` activation patching's result under "patching" (analysis.patching, its columns
    COLUMNS); with `circuit` the circuit's under "circuit" (analysis.circuit; no kinds: "by_kind"
    is empty; the embedding node CHANGED), or, on fewer than MIN_FOR_STATS pairs, why not under
    "circuit_skipped": analysis.circuit_results.PairsResult. ValueError as encode_pairs;
    ReversedPairs where the corrupt prompts favour the answer as much as the clean ones or more
    (nothing to recover)."""
    pairs = encode_pairs(tokenizer, text_pairs, model.config.block_size)
    clean_ld, corrupt_ld = mean_lds(model, pairs)
    if not clean_ld > corrupt_ld:  # before any patch: every fraction would divide by it
        raise ReversedPairs(clean_ld, corrupt_ld)
    last_changed = sum(p.clean[-1] != p.corrupt[-1] for p in pairs)
    result: PairsResult = {"pairs": len(pairs), "last_changed": last_changed}
    if patch:
        patched = patching_of_pairs(model, [before_last(p) for p in pairs], seed, resamples)
        result["patching"] = {**patched, "columns": list(COLUMNS)}
    if circuit and len(pairs) < MIN_FOR_STATS:
        result["circuit_skipped"] = {"reason": TOO_FEW, "needs": MIN_FOR_STATS}
    elif circuit:
        found = circuit_of_pairs(model, pairs, [None] * len(pairs), seed=seed, resamples=resamples)
        rename = {"embed:antecedent": CHANGED}
        found["edges"] = [{**e, "from": rename.get(e["from"], e["from"])} for e in found["edges"]]
        result["circuit"] = {**found, "skipped": 0}
    return result
