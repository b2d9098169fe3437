"""The circuit that carries the antecedent to the pronoun: edges scored, checked and pruned.

On the corrupted twins of analysis/patching.py (the antecedent swapped for a same-kind noun of
the same token length) and its metric, the logit difference at the pronoun LD = logit(clean
next) - logit(twin's next), M = mean LD over a set of examples:

1. every edge of the graph (analysis/edges.py) is scored by edge attribution patching, a
   first-order estimate of M(edge patched from the twin) - M(clean);
2. the whole set's CHECKED edges with the largest |score| are patched for real, one at a time,
   and each set (the whole, each kind) compares them with its own examples' scores (Spearman's
   rank correlation, sign agreement, the median ratio score / real);
3. the circuit is the top k edges by |score|, for the smallest k whose faithfulness
       (M(only the circuit kept, every other edge patched) - M(corrupt)) / (M(clean) - M(corrupt))
   is at least FAITHFUL, found by binary search over the sizes of `sizes` (every k up to 16,
   then steps of a quarter), which takes faithfulness to grow with k; the faithfulness
   reported is the one measured at the k found. The whole graph kept is the
   clean run (1), none kept the twin's (0).

An edge's share is its effect over the clean-vs-corrupt gap M(clean) - M(corrupt): the part of
the model's preference that patching it alone takes away. Each kind of sentence (decided_by:
agreement, role, meaning) gets its own scores and circuit beside the whole set's. A set whose
gap is under MIN_GAP, or whose gap's interval reaches 0, shows no preference to explain: it is
reported as such, with no circuit (a faithfulness over a gap near 0 is noise divided by noise).

Intervals: 95% percentile bootstrap over examples (ratios of means, as analysis/patching.py),
none below analysis.probe.MIN_FOR_STATS examples.
"""

from collections.abc import Callable, Iterable
from typing import NamedTuple

import torch

from analysis.bootstrap import interval, resample
from analysis.circuit_results import Agreement, CircuitResult, CircuitSet, Edge, PairsCircuit
from analysis.edge_measures import attribution, patched_lds, single_lds, twin_runs
from analysis.edges import Batch, Graph, build_graph, make_batches
from analysis.patching import recovered, twin_pairs
from analysis.probe import MIN_FOR_STATS
from data.pronouns import DECIDED_BY
from data.tokenizer import Tokenizer
from model.gpt import GPT

FAITHFUL = 0.9  # the share of the gap a circuit must keep
# A gap below half a logit moves the odds of the two continuations by less than e^0.5 ≈ 1.6:
# too little to say the model prefers the antecedent's continuation.
MIN_GAP = 0.5
CHECKED = 10  # top edges patched for real, one at a time
SHOWN = 20  # edges listed beyond the circuit's own


def trace_circuit(
    model: GPT,
    tokenizer: Tokenizer,
    examples: list,
    seed: int = 0,
    resamples: int = 1000,
    checked: int = CHECKED,
    min_gap: float | None = MIN_GAP,
) -> CircuitResult:
    """The circuit of `examples` (see the module docstring), the whole set's at the top level
    and each kind's under "by_kind" (analysis.circuit_results.CircuitResult). min_gap None
    searches a circuit whatever the gap (for timing a model that has none). NoTwins where no
    example has a twin."""
    pairs, kept = twin_pairs(tokenizer, examples, model.config.block_size, seed, "the circuit")
    kinds = [ex.decided_by for ex in kept]
    result = circuit_of_pairs(
        model, pairs, kinds, seed=seed, resamples=resamples, checked=checked, min_gap=min_gap
    )
    result["skipped"] = len(examples) - len(pairs)
    return result


def circuit_of_pairs(
    model: GPT,
    pairs: list,
    kinds: list,
    seed: int = 0,
    resamples: int = 1000,
    checked: int = CHECKED,
    min_gap: float | None = MIN_GAP,
    faithful: float = FAITHFUL,
) -> PairsCircuit:
    """trace_circuit's result for Pairs of analysis.patching and each one's kind (or None), the
    circuit keeping at least `faithful` of the gap."""
    cfg, device = model.config, next(model.parameters()).device
    graph = build_graph(cfg.n_layer, cfg.n_head)
    batches = make_batches(pairs, kinds, len(graph.senders), cfg.n_embd, device)
    twins, corrupt = twin_runs(model, graph, batches)
    cleans = []
    scores, clean = attribution(model, graph, batches, twins, cleans)
    S, R = graph.allowed.shape

    def patched(edges, only=None):  # (N,) LDs with exactly `edges` (flat indices) patched
        where = torch.zeros(S * R, dtype=torch.bool)
        where[edges] = True
        return patched_lds(model, graph, batches, twins, where.view(S, R), only)

    # The whole set's top edges, patched one at a time on every example: each set compares
    # them with its own examples' attributions.
    top = ranked(scores.mean(0), graph)[:checked].tolist()
    singles = {e: single_lds(model, graph, batches, twins, cleans, e) for e in top}
    del cleans
    context = Measured(batches, graph, scores, clean, corrupt, singles, patched)
    options = dict(seed=seed, resamples=resamples, min_gap=min_gap, faithful=faithful)
    result = one_set(context, range(len(batches)), **options)
    result["by_kind"] = {}
    for kind in DECIDED_BY:
        chosen = [i for i, b in enumerate(batches) if kinds[b.rows[0]] == kind]
        if chosen:
            result["by_kind"][kind] = one_set(context, chosen, **options)
    result.update(
        n_edges=int(graph.allowed.sum()),
        threshold=faithful,
        min_gap=min_gap,
        checked=len(singles),
        seed=seed,
        resamples=resamples,
    )
    return result


def ranked(mean: torch.Tensor, graph: Graph) -> torch.Tensor:
    """The graph's edges (flat indices into (S, R)) by |mean score|, largest first."""
    flat = graph.allowed.flatten().nonzero().flatten()
    return flat[mean.flatten()[flat].abs().argsort(descending=True, stable=True)]


class Measured(NamedTuple):
    """What every set's circuit is read from: the measurements of all examples."""

    batches: list[Batch]
    graph: Graph
    scores: torch.Tensor  # (N, S, R) each example's attribution of each edge
    clean: torch.Tensor  # (N,) LDs of the clean runs
    corrupt: torch.Tensor  # (N,) LDs of the twins
    singles: dict[int, torch.Tensor]  # checked edge (flat index) -> (N,) LDs with it patched
    patched: Callable  # patched(edges, only) -> (N,) LDs with `edges` patched (NaN off `only`)


def one_set(
    context: Measured,
    chosen: Iterable[int],
    seed: int,
    resamples: int,
    min_gap: float | None,
    faithful: float = FAITHFUL,
) -> CircuitSet:
    """The circuit of the examples in batches `chosen`."""
    chosen = set(chosen)
    rows = torch.tensor(sorted(r for i in chosen for r in context.batches[i].rows))
    c, z = context.clean[rows], context.corrupt[rows]
    n = len(rows)
    draws = resample(n, resamples, seed) if n >= MIN_FOR_STATS else None
    gap = (c - z).mean().item()
    gap_ci = interval((c - z)[draws].mean(1)) if draws is not None else None
    out = {
        "n": n,
        "clean_ld": c.mean().item(),
        "corrupt_ld": z.mean().item(),
        "gap": gap,
        "gap_ci": gap_ci,
    }
    out["preference"] = min_gap is None or (gap >= min_gap and (gap_ci is None or gap_ci[0] > 0))
    if not out["preference"]:
        return {**out, "edges": [], "faithfulness": None, "size": None}

    eap = context.scores[rows]  # (n, S, R)
    order = ranked(eap.mean(0), context.graph)
    size, lds = prune(
        lambda k: context.patched(order[k:], chosen)[rows], len(order), z, c, faithful
    )
    faith, faith_ci = _recovered(lds, c, z, draws)
    R = eap.size(2)
    checks = [
        (eap[:, e // R, e % R].mean().item(), (lds[rows] - c).mean().item())
        for e, lds in context.singles.items()
    ]
    return {
        **out,
        "edges": _listed(context, order[: max(SHOWN, size)].tolist(), size, rows, draws),
        "faithfulness": faith,
        "faithfulness_ci": faith_ci,
        "size": size,
        "agreement": agreement(checks),
    }


def _recovered(lds, clean, corrupt, draws) -> tuple[float, list[float] | None]:
    """(mean LD - corrupt) / (clean - corrupt) of the (n,) LDs, and its interval over `draws`
    (None without)."""
    point = recovered(lds, clean, corrupt).item()
    if draws is None:
        return point, None
    return point, interval(recovered(lds[draws], clean[draws], corrupt[draws]))


def _share(lds, clean, corrupt, draws) -> tuple[float, list[float] | None]:
    """The share of the gap a patch giving the (n,) LDs takes away: 1 - recovered."""
    point, ci = _recovered(lds, clean, corrupt, draws)
    return 1 - point, None if ci is None else [1 - ci[1], 1 - ci[0]]


def _listed(context: Measured, edges, size, rows, draws) -> list[Edge]:
    """The JSON rows of `edges` (flat indices, ranked), the first `size` in the circuit."""
    graph, R = context.graph, context.scores.size(2)
    c, z = context.clean[rows], context.corrupt[rows]
    out = []
    for rank, e in enumerate(edges):
        values = context.scores[rows, e // R, e % R]  # (n,) estimates of LD patched - LD clean
        edge = {
            "from": graph.senders[e // R],
            "to": graph.receivers[e % R],
            "eap": values.mean().item(),
            "in_circuit": rank < size,
        }
        edge["share"], edge["share_ci"] = _share(c + values, c, z, draws)
        if e in context.singles:
            alone = context.singles[e][rows]
            edge["patched"] = (alone - c).mean().item()
            edge["patched_share"], edge["patched_share_ci"] = _share(alone, c, z, draws)
        out.append(edge)
    return out


def sizes(n_edges: int) -> list[int]:
    """The circuit sizes the search tries: every one up to 16, then steps of a quarter, then
    the whole graph (~50 sizes for GPT-2 small's 32,936 edges: 6 passes to search, not 15)."""
    out = list(range(min(n_edges, 16) + 1))
    while out[-1] < n_edges:
        out.append(min(n_edges, max(out[-1] + 1, round(out[-1] * 1.25))))
    return out


def prune(
    kept: Callable,
    n_edges: int,
    corrupt: torch.Tensor,
    clean: torch.Tensor,
    faithful: float = FAITHFUL,
) -> tuple[int, torch.Tensor]:
    """(k, LDs) for the smallest k of sizes(n_edges) whose faithfulness is >= `faithful`, by
    binary search, where kept(k) gives the LDs with the top k edges kept; the whole graph (the
    clean run) if no smaller size is."""
    gap = clean.mean() - corrupt.mean()

    def enough(lds):
        return ((lds.mean() - corrupt.mean()) / gap).item() >= faithful

    grid = sizes(n_edges)
    lo, hi, best = 0, len(grid) - 1, clean
    while lo < hi:
        mid = (lo + hi) // 2
        lds = kept(grid[mid])
        if enough(lds):
            hi, best = mid, lds
        else:
            lo = mid + 1
    return grid[hi], best


def agreement(checks: list[tuple[float, float]]) -> Agreement:
    """How well attribution matches real patching on (eap, patched) pairs of mean effects:
    Spearman's rank correlation, the share of edges whose signs agree, the median ratio."""
    if len(checks) < 2:
        return {"edges": len(checks)}
    eap, real = torch.tensor(checks, dtype=torch.float64).T

    def ranks(x):
        return x.argsort().argsort().double()

    a, b = ranks(eap) - ranks(eap).mean(), ranks(real) - ranks(real).mean()
    ratios = (eap / real)[real != 0]
    return {
        "edges": len(checks),
        "spearman": ((a * b).sum() / (a.norm() * b.norm())).item(),
        "sign_agreement": (eap.sign() == real.sign()).double().mean().item(),
        "median_ratio": ratios.median().item() if len(ratios) else None,
    }
