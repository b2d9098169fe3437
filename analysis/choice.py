"""Which candidate wins: the choice metric, the model's choice accuracy, the heads that decide,
and the choice circuit, on choice twins (analysis/choice_pairs.py: both candidates kept, the
answer flipped).

The choice metric CM at the pronoun (analysis/choice_metric.py) is above 0 where the model
prefers the example's antecedent to its twin's. Choice accuracy is the share of examples with
CM > 0 on the example (the clean run); flip the share with CM > 0 on the example AND CM < 0 on
its twin: the model's choice follows what decides. Chance is 1/2 for accuracy, 1/4 for flip (a
coin for each). A set shows a preference where its flip lies above PREFERS (the flip's chance)
with its interval: the choice follows the reason more often than coins would make it. Only
then, and where its twins move CM enough (analysis.circuit's MIN_GAP), is its circuit drawn and
its neurons sought: `circuit.drawn` is the one rule by which the reports say what decides a
reason, or that the model does not choose by it.

A head decides (Yamakoshi et al. 2023's rule) where patching it alone flips the preference in
both directions: its output (attn.hook_z of that head, at every position: all it writes)
taken from the twin's run makes CM < 0 on the example, and taken from the example's run makes
CM > 0 on the twin. Read on the examples the model gets right both ways (flip); a head decides a
set where it flips at least DECIDES of them, on a set with at least MIN_FOR_STATS such examples
(on fewer, no head is named: one or two examples would name any head they happen to move). For
each deciding head, the same rule on its query, key and value inputs apart (hook_q_input, ...:
the stream it reads, at every position) says through which it decides.

Inside each MLP, for each reason whose circuit is drawn, the few neurons that carry most of
what the layer does to CM, patched as a set, and the tokens they write: analysis/neurons.py.

The choice circuit is analysis/circuit.py's on these pairs (its metric is CM, its gap the mean CM
on the examples less the mean on their twins), pruned to keep FAITHFUL of the gap; its embedding
node at the changed tokens is named CHANGED here (in the identity circuit it is the antecedent's).

Intervals: 95% percentile bootstrap over examples (analysis/bootstrap.py), none below
analysis.probe.MIN_FOR_STATS examples.
"""

import torch

from analysis.bootstrap import means_with_intervals, resample
from analysis.choice_metric import choice_margins, choice_metrics, head_inputs
from analysis.choice_pairs import Choices, choice_pairs
from analysis.circuit import circuit_of_pairs
from analysis.circuit_results import (
    ChoiceCircuit,
    ChoiceResult,
    ChoiceSet,
    CircuitSet,
    Through,
    Twins,
)
from analysis.errors import NothingToMeasure
from analysis.neurons import neurons_by_layer
from analysis.patching import patching_of_pairs
from analysis.probe import MIN_FOR_STATS
from analysis.results import Study
from data.pronouns import DECIDED_BY, Example
from data.tokenizer import Tokenizer
from model.gpt import GPT

PREFERS = 0.25  # the flip's chance, which a preferring set's flip and its interval lie above
DECIDES = 0.5  # the share of right-both-ways examples a deciding head must flip
FAITHFUL = 0.8  # the share of the gap the choice circuit keeps
CHANGED = "embed:changed"


def _choices(clean: torch.Tensor, twin: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per example: right (accuracy), right both ways (flip), and the two CMs."""
    return {
        "accuracy": (clean > 0).double(),
        "flip": ((clean > 0) & (twin < 0)).double(),
        "clean_cm": clean,
        "twin_cm": twin,
    }


def choice_accuracy(clean: torch.Tensor, twin: torch.Tensor, seed: int, resamples: int) -> dict:
    """{n, accuracy, flip, clean_cm, twin_cm, each with "_ci" on at least MIN_FOR_STATS
    examples; prefers} for one set's (N,) CMs (see the module docstring)."""
    values = _choices(clean, twin)
    n = len(clean)
    if n >= MIN_FOR_STATS:
        out = means_with_intervals(values, resample(n, resamples, seed))
    else:
        out = {k: v.mean().item() for k, v in values.items()}
        out.update({f"{k}_ci": None for k in values})
    ci = out["flip_ci"]
    out["prefers"] = out["flip"] > PREFERS and (ci is None or ci[0] > PREFERS)
    return {"n": n, **out}


def choice_by_kind(model: GPT, made: Choices) -> dict[str, dict]:
    """{kind: {twins, accuracy, flip}} for each kind of the pairs `made` (choice_pairs'): the
    clean and twin runs alone, no interval and nothing patched, so that training can log it at
    every probe (the kind's count of token-aligned twins, its choice accuracy and flip)."""
    if not made.pairs:
        return {}
    values = _choices(*choice_margins(model, made.pairs))
    out = {}
    for kind in [k for k in DECIDED_BY if k in made.kinds]:
        rows = [i for i, k in enumerate(made.kinds) if k == kind]
        out[kind] = {"twins": len(rows)} | {
            name: values[name][rows].mean().item() for name in ("accuracy", "flip")
        }
    return out


def deciding(heads: torch.Tensor, clean: torch.Tensor, twin: torch.Tensor) -> dict:
    """{flip_share: [layer][head], deciding: ["L{l}H{h}", ...], right: examples right both
    ways} for one set: (L, H, 2, N) patched CMs and (N,) CMs (see the module docstring)."""
    right = (clean > 0) & (twin < 0)
    flips = (heads[:, :, 0] < 0) & (heads[:, :, 1] > 0) & right  # (L, H, N)
    n = int(right.sum())
    share = flips.sum(-1).double() / max(n, 1)  # (L, H)
    share[heads[:, :, 0, :1].isnan().squeeze(-1)] = float("nan")  # not tested
    names = [
        f"L{l}H{h}"
        for l in range(share.size(0))
        for h in range(share.size(1))
        if n >= MIN_FOR_STATS and share[l, h] >= DECIDES
    ]
    flip_share = [[None if x != x else x for x in row] for row in share.tolist()]  # NaN -> None
    return {"right": n, "flip_share": flip_share, "deciding": names}


def _through(inputs: torch.Tensor, clean: torch.Tensor, twin: torch.Tensor) -> Through:
    """{q, k, v: the share of the right-both-ways examples whose preference patching that input
    alone flips both ways} for one head's (3, 2, N) patched CMs."""
    right = (clean > 0) & (twin < 0)
    flips = (inputs[:, 0] < 0) & (inputs[:, 1] > 0) & right  # (3, N)
    shares = (flips.sum(-1).double() / max(int(right.sum()), 1)).tolist()
    return dict(zip("qkv", shares))


def _circuit(part: dict, prefers: bool) -> ChoiceCircuit:
    """One set's circuit from circuit_of_pairs, its embedding node renamed; no edges where the
    set shows no preference."""
    keep = ("gap", "gap_ci", "size", "faithfulness", "faithfulness_ci", "agreement")
    out = {k: part.get(k) for k in keep}
    out["drawn"] = prefers and part["preference"]
    rename = {"embed:antecedent": CHANGED}
    out["edges"] = [
        {**e, "from": rename.get(e["from"], e["from"])} for e in part["edges"] if out["drawn"]
    ]
    if not out["drawn"]:
        out.update(faithfulness=None, faithfulness_ci=None, size=None)
    return out


def choice_study(
    model: GPT,
    tokenizer: Tokenizer,
    examples: list[Example],
    seed: int = 0,
    resamples: int = 1000,
    patch: bool = False,
) -> ChoiceResult:
    """The whole set's {n, accuracy, flip, ..., prefers, deciding, circuit} at the top
    level and each kind's under "by_kind", with the twins found and skipped (see the module
    docstring); with `patch`, activation patching (analysis.patching.patching_of_pairs: the
    example's run patched into the twin's) on the whole set under "patching", its first column
    the changed tokens. Each key is documented at analysis.circuit_results.ChoiceResult.
    NothingToMeasure("choice") where no example has a token-aligned twin."""
    made = choice_pairs(tokenizer, examples, model.config.block_size)
    if not made.pairs:
        raise NothingToMeasure(
            "choice",
            f"none of the {len(examples)} examples has a choice twin of its token length under "
            'this model\'s tokenizer (a JSONL line gives its own as "twin"; the lexicon makes '
            'them for lines with a "decided_by" whose candidates are its nouns)',
        )
    clean, twin, heads = choice_metrics(model, made.pairs)
    circuit = circuit_of_pairs(
        model, made.pairs, made.kinds, seed=seed, resamples=resamples, faithful=FAITHFUL
    )
    sets = {None: list(range(len(made.pairs)))}
    for kind in DECIDED_BY:
        sets[kind] = [i for i, k in enumerate(made.kinds) if k == kind]
    out = {}
    for kind, rows in sets.items():
        if not rows:
            continue
        part = choice_accuracy(clean[rows], twin[rows], seed, resamples)
        part.update(deciding(heads[..., rows], clean[rows], twin[rows]))
        found = circuit if kind is None else circuit["by_kind"][kind]
        part["circuit"] = _circuit(found, part["prefers"])
        if kind is not None and part["circuit"]["drawn"]:
            part["neurons"] = neurons_by_layer(model, tokenizer, [made.pairs[i] for i in rows])
        out[kind] = part
    named = sorted({h for part in out.values() for h in part["deciding"]})
    inputs = head_inputs(model, made.pairs, named) if named else None
    for kind, part in out.items():
        rows = sets[kind]
        part["inputs"] = {
            h: _through(inputs[named.index(h)][..., rows], clean[rows], twin[rows])
            for h in part["deciding"]
        }
    result = out.pop(None)
    result["by_kind"] = out
    result.update(_twins(made), threshold=FAITHFUL, prefers_from=PREFERS, decides_from=DECIDES)
    result.update(n_edges=circuit["n_edges"], seed=seed, resamples=resamples)
    if patch:
        patched = patching_of_pairs(model, made.pairs, seed, resamples)
        result["patching"] = {**patched, "columns": ["changed", *patched["columns"][1:]]}
    return result


def _twins(made: Choices) -> dict[str, Twins]:
    return {"twins": {"found": made.found, "tried": made.tried, "skipped": made.skipped}}


def shared_edges(identity: CircuitSet | dict, choice: ChoiceResult | ChoiceSet) -> list[str]:
    """The edges ("from -> to") in both circuits of one set (identity: analysis/circuit.py's
    result for it, choice: choice_study's)."""

    def names(edges):
        return {f"{e['from']} -> {e['to']}" for e in edges if e["in_circuit"]}

    return sorted(names(identity.get("edges", [])) & names(choice["circuit"]["edges"]))


def with_shared(
    result: Study, model: GPT, tokenizer: Tokenizer, examples: list[Example], patch: bool = False
) -> None:
    """Put choice_study's result (with `patch`, its patching too) under result["choice"] (or why
    not under "choice_skipped"), each set's edges shared with the identity circuit
    (result["circuit"]) in "shared_edges"."""
    try:
        choice = choice_study(model, tokenizer, examples, patch=patch)
    except NothingToMeasure as e:
        result["choice_skipped"] = {"reason": e.reason, "message": str(e)}
        return
    identity = result.get("circuit")
    if identity is not None:
        choice["shared_edges"] = shared_edges(identity, choice)
        for kind, part in choice["by_kind"].items():
            part["shared_edges"] = shared_edges(identity["by_kind"].get(kind, {}), part)
    result["choice"] = choice
