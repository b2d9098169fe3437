"""Each example's measures over every batch of a set, from the runners of analysis/edge_runs.py:
the twins' runs and LDs, attribution's scores and clean LDs, the LDs with a set of edges patched,
and with one edge patched alone. Results are (N,) or (N, S, R) tensors in float64 on the CPU,
rows in the order of the pairs the batches were made from.
"""

import torch

from analysis.edge_runs import Clean, Recorded, attribute, lds, patch, patch_one, record
from analysis.edges import Batch, Graph, corrections
from model.gpt import GPT


def _spread(values: torch.Tensor, batches: list[Batch], n: int) -> torch.Tensor:
    """(n,) float64 on the CPU: `values` in batch order put at their rows, NaN elsewhere."""
    out = torch.full((n,), float("nan"), dtype=torch.float64)
    out[[r for b in batches for r in b.rows]] = values.detach().double().cpu()
    return out


@torch.no_grad()
def twin_runs(
    model: GPT, graph: Graph, batches: list[Batch]
) -> tuple[list[Recorded], torch.Tensor]:
    """The twins' runs, one Recorded per batch, and their LDs (N,)."""
    runs = [record(model, graph, batch, batch.corrupt) for batch in batches]
    n = sum(len(b.rows) for b in batches)
    return [r for r, _ in runs], _spread(lds(model, [f for _, f in runs], batches), batches, n)


@torch.no_grad()
def patched_lds(
    model: GPT,
    graph: Graph,
    batches: list[Batch],
    twins: list[Recorded],
    patched: torch.Tensor,
    only: set | None = None,
) -> torch.Tensor:
    """(N,) each example's LD on its clean input with the (S, R) bool `patched` edges patched
    from its twin (NaN for rows of the batches not in `only`, a set of batch indices)."""
    plan = corrections(graph, patched & graph.allowed)
    chosen = [i for i in range(len(batches)) if only is None or i in only]
    finals = [patch(model, graph, batches[i], twins[i], plan) for i in chosen]
    n = sum(len(b.rows) for b in batches)
    return _spread(
        lds(model, finals, [batches[i] for i in chosen]), [batches[i] for i in chosen], n
    )


def attribution(
    model: GPT,
    graph: Graph,
    batches: list[Batch],
    twins: list[Recorded],
    cleans: list | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Edge attribution patching: (N, S, R) each example's first-order estimate of LD(edge
    patched) - LD(clean), 0 where no edge is, and the clean LDs (N,). `cleans`, a list, receives
    each batch's Clean run (what single_lds starts from)."""
    n = sum(len(b.rows) for b in batches)
    S, R = graph.allowed.shape
    scores = torch.zeros(n, S, R, dtype=torch.float64)
    clean = torch.zeros(n, dtype=torch.float64)
    for batch, twin in zip(batches, twins):
        part, ld, run = attribute(model, graph, batch, twin)
        scores[batch.rows], clean[batch.rows] = part.cpu(), ld.double().cpu()
        if cleans is not None:
            cleans.append(run)
    return scores * graph.allowed, clean


@torch.no_grad()
def single_lds(
    model: GPT,
    graph: Graph,
    batches: list[Batch],
    twins: list[Recorded],
    cleans: list[Clean],
    edge: int,
) -> torch.Tensor:
    """(N,) each example's LD with the one edge `edge` (a flat index into (S, R)) patched, as
    patched_lds gives it, each pass started where the edge is read (patch_one)."""
    finals = [patch_one(model, graph, b, t, c, edge) for b, t, c in zip(batches, twins, cleans)]
    return _spread(lds(model, finals, batches), batches, sum(len(b.rows) for b in batches))
