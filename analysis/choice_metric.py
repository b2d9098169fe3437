"""The choice metric under patching, on choice twins (analysis/choice_pairs.py: both candidates
kept, the answer flipped): what analysis/choice.py reads which candidate wins and the heads that
decide from.

The choice metric at the pronoun, for an example whose antecedent is A and whose twin's is B:

    CM = logit(A's continuation's first token) - logit(B's continuation's first token)

above 0 where the model prefers A. A point is patched both ways: its activation taken from the
twin's run into the example's, and from the example's run into the twin's. Patching every head
costs two passes a head, so only the CANDIDATES heads with the largest first-order estimate of
what patching them does are patched for real.
"""

import torch

from analysis.batching import BATCH_SIZE
from analysis.interventions import replace_where
from analysis.patching import Pair
from model.gpt import GPT
from model.hooks import caching, hooks
from model.split_inputs import split_inputs

# Heads patched for real, both ways, to find the deciding ones: those with the largest
# first-order estimate of what patching them does (GPT-2 small has 144; each costs 2 passes).
CANDIDATES = 8


def _cm(model, ids, pairs):
    """(B,) choice metric at each pair's pronoun (its last real position) on the run of ids:
    the blocks over every position, the unembedding at the pronoun only (the one row read)."""
    b = torch.arange(len(pairs))
    stream = model.residual(ids)[b, [len(p.clean) - 1 for p in pairs]]  # (B, C)
    last = model.unembed(stream).double()  # (B, V)
    nexts = torch.tensor([[p.clean_next, p.corrupt_next] for p in pairs], device=last.device)
    return (last[b, nexts[:, 0]] - last[b, nexts[:, 1]]).cpu()


def _leaf(x, hook):
    """A hook that makes the embeddings a leaf of autograd's graph, so gradients start there."""
    return x.detach().requires_grad_()


def _padded(pairs, which, device):
    """(B, T) ids, padded on the right: a causal model's positions up to each pronoun never see
    what follows, so the padding changes nothing that is read."""
    T = max(len(p.clean) for p in pairs)
    return torch.tensor(
        [getattr(p, which) + [0] * (T - len(p.clean)) for p in pairs], device=device
    )


@torch.no_grad()
def _batch(model, pairs, points):
    """(clean CM, twin CM, (P, 2, B) CM with one point patched: [:, 0] from the twin's run into
    the example's, [:, 1] from the example's into the twin's) for a batch of pairs; `points`
    are (hook name, index) pairs, the index a head or a list of them (a point whose activation
    has its heads third, hook_z) or of neurons (mlp.hook_post, (B, T, 4C))."""
    device = next(model.parameters()).device
    clean, twin = _padded(pairs, "clean", device), _padded(pairs, "corrupt", device)
    names = sorted({name for name, _ in points})
    with caching(model, names) as clean_cache:
        cm_clean = _cm(model, clean, pairs)
    with caching(model, names) as twin_cache:
        cm_twin = _cm(model, twin, pairs)
    patched = torch.zeros(len(points), 2, len(pairs), dtype=torch.float64)
    for i, (name, h) in enumerate(points):
        where = torch.zeros(1, 1, clean_cache[name].size(2), dtype=torch.bool, device=device)
        where[..., h] = True  # (1, 1, H): head h (or neurons h) at every example and position
        for d, (run, source) in enumerate(((clean, twin_cache), (twin, clean_cache))):
            with hooks(model, {name: replace_where(where, source[name])}):
                patched[i, d] = _cm(model, run, pairs)
    return cm_clean, cm_twin, patched


def patch_points(
    model: GPT, pairs: list[Pair], points: list[tuple[str, int | list[int]]]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(N,) CM on the examples, (N,) on their twins, and (P, 2, N) CM with each of `points`
    patched both ways (_batch's), in the order of `pairs`: BATCH_SIZE pairs at a time, by
    length (the least padding)."""
    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i].clean))
    parts = [
        _batch(model, [pairs[i] for i in order[j : j + BATCH_SIZE]], points)
        for j in range(0, len(pairs), BATCH_SIZE)
    ]
    back = torch.tensor(order).argsort()  # sorted position of each pair
    return tuple(torch.cat(values, -1)[..., back] for values in zip(*parts))


def first_order(model: GPT, pairs: list[Pair], names: list[str], dims: tuple) -> torch.Tensor:
    """(len(names), size) first-order estimate of |CM patched - CM| for each unit of each point
    patched, both ways, summed over the pairs: (a_other - a) . dCM/da, the gradient taken on
    each run, summed over the activation's `dims` (those beside the batch and the unit's)."""
    device = next(model.parameters()).device
    total = None
    for i in range(0, len(pairs), BATCH_SIZE):
        part = pairs[i : i + BATCH_SIZE]
        runs = [_padded(part, which, device) for which in ("clean", "corrupt")]
        caches = []
        for ids in runs:
            with torch.no_grad(), caching(model, names) as cache:
                model.residual(ids)  # only the points are read: no unembedding
            caches.append(cache)
        for ids, other in ((runs[0], caches[1]), (runs[1], caches[0])):
            with (
                torch.enable_grad(),
                hooks(model, {"hook_embed": _leaf}),
                caching(model, names, detach=False) as kept,  # with their graphs
            ):
                cm = _cm(model, ids, part)
                grads = torch.autograd.grad(cm.sum(), [kept[n] for n in names])
            moved = [((other[n] - kept[n].detach()) * g).sum(dims) for n, g in zip(names, grads)]
            moved = torch.stack(moved).abs().sum(1).double().cpu()  # (len(names), size)
            total = moved if total is None else total + moved
    return total


def choice_margins(model: GPT, pairs: list[Pair]) -> tuple[torch.Tensor, torch.Tensor]:
    """(N,) CM on the examples and (N,) CM on their twins, in the order of `pairs`: the clean
    and twin runs alone, nothing patched (what training logs at each probe)."""
    clean, twin, _ = patch_points(model, pairs, [])
    return clean, twin


def choice_metrics(
    model: GPT, pairs: list[Pair]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(N,) CM on the examples, (N,) CM on their twins, and (L, H, 2, N) CM with one head's
    output patched (attn.hook_z; [..., 0] the twin's into the example's run, [..., 1] the other
    way), in the order of `pairs`. Only the CANDIDATES heads with the largest first-order
    estimate (_estimate) are patched for real (all of them in a model of as many heads); the
    others' rows are NaN: not tested."""
    L, H = model.config.n_layer, model.config.n_head
    tested = list(range(L * H))
    if L * H > CANDIDATES:
        names = [f"blocks.{l}.attn.hook_z" for l in range(L)]
        estimate = first_order(model, pairs, names, dims=(1, 3))  # hook_z: (B, T, H, D)
        tested = estimate.flatten().argsort(descending=True)[:CANDIDATES].tolist()
    points = [(f"blocks.{i // H}.attn.hook_z", i % H) for i in tested]
    clean, twin, patched = patch_points(model, pairs, points)
    heads = torch.full((L * H, 2, len(pairs)), float("nan"), dtype=torch.float64)
    heads[tested] = patched
    return clean, twin, heads.view(L, H, 2, -1)


def head_inputs(model: GPT, pairs: list[Pair], heads: list[str]) -> torch.Tensor:
    """(len(heads), 3, 2, N) CM with one input of one head ("L{l}H{h}") patched, its query, key
    or value input (hook_q_input, ...; the stream it reads, at every position), both ways."""
    split_inputs(model)
    points = []
    for name in heads:
        l, h = int(name[1 : name.index("H")]), int(name[name.index("H") + 1 :])
        points += [(f"blocks.{l}.hook_{part}_input", h) for part in "qkv"]
    return patch_points(model, pairs, points)[2].view(len(heads), 3, 2, -1)
