"""The graph of analysis/edges.py run through the model: three runners over one small state.

    record      one pass with every sender's write kept, and what each receiver group read
                (the twins' run: what a patch subtracts, and the inputs a "twin" Step reads);
    patch       one pass with a plan of corrections (edges.corrections): each receiver reads
                its Step; only the senders some Step names are recorded;
    attribute   one clean pass with autograd's graph and every receiver's input split per
                head, then one backward pass: each receiver's input gradient meets the matrix
                of the senders' differences twin - clean (S, B, T, C), as edge attribution
                patching's code builds it, scoring every edge at once.

Each runs the model to its final stream (GPT.residual: no unembedding of every position) and the
logits receiver reads that stream; the LD is read at the pronoun alone, through GPT.unembed,
for all of a pass's batches in one call.

What is hooked changes what is computed: a hooked hook_result computes each head's write apart,
a hooked q, k or v input each head's own copy of the stream. A patch hooks a layer's heads only
where some Step names them, and its q, k, v inputs only where some head there has a Step; where
every head reads the twin's stream for q, k and v (every edge into the layer's heads patched),
ln1 is handed the twin's own normalised stream and the layer runs unsplit.

analysis/edge_measures.py runs them over every batch of a set.

Letters: N examples, B batch, T tokens, C channels, H heads, G receivers of a group, S senders.
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from analysis.edges import Batch, Graph, Group, Step
from model.gpt import GPT
from model.hooks import hooks
from model.split_inputs import split_inputs


class Recorded(NamedTuple):
    """One run of a batch, as record() keeps it."""

    acts: torch.Tensor  # (S, B, T, C) every sender's write
    inputs: list[torch.Tensor]  # per group of the graph: the stream it read (B, T, C)
    normalized: list[torch.Tensor]  # per layer: ln1's output, what attention reads (B, T, C)


class Clean(NamedTuple):
    """What one edge patched alone starts from, kept by attribute(): the clean run's stream
    entering each block and leaving the last (L + 1 of them, (B, T, C)), and the writes of the
    senders that are no head (the embeddings' and the MLPs'; the heads' would be most of the
    memory)."""

    streams: list[torch.Tensor]
    writes: dict[int, torch.Tensor]


@dataclass
class _State:
    """What one pass carries between its hooks."""

    graph: Graph
    batch: Batch
    acts: torch.Tensor | None = None  # (S, B, T, C) where every sender is recorded
    twin: Recorded | None = None  # what the differences are taken against
    needed: set = field(default_factory=set)  # senders whose differences a plan reads
    diff: torch.Tensor | None = None  # (S, B, T, C) this run minus the twin, where needed, else 0
    normalized: list = field(default_factory=list)
    leaf: torch.Tensor | None = None  # the embeddings, where gradients are taken


def _keep(state: _State, first: int, value: torch.Tensor) -> None:
    """Senders first .. first + n - 1 wrote value (n, B, T, C)."""
    if state.acts is not None:
        state.acts[first : first + len(value)] = value.detach()
    for i in range(len(value)):
        if first + i in state.needed:
            torch.sub(value[i], state.twin.acts[first + i], out=state.diff[first + i])


def _sender_hooks(model, state: _State, layers=None, grad=False) -> dict:
    """Hooks that record the embeddings' senders, the heads' writes of `layers` (None: all) and
    every MLP's write; with grad, the embeddings become the leaf gradients are taken to."""
    graph, where = state.graph, state.batch.antecedent[..., None]  # (B, T, 1)

    def embed(x, hook):
        if grad:
            x = state.leaf = x.detach().requires_grad_(True)
        _keep(state, 0, torch.stack((x * where, x * ~where)))
        return x

    def heads(first):
        return lambda x, hook: _keep(state, first, x.permute(2, 0, 1, 3))  # (H, B, T, C)

    def mlp(first):
        return lambda x, hook: _keep(state, first, x[None])

    fns = {"blocks.0.hook_resid_pre": embed}
    for l in range(model.config.n_layer):
        if layers is None or l in layers:
            fns[f"blocks.{l}.attn.hook_result"] = heads(graph.heads[l].start)
        fns[f"blocks.{l}.hook_mlp_out"] = mlp(graph.mlps[l])
    return fns


def record(
    model: GPT, graph: Graph, batch: Batch, ids: torch.Tensor
) -> tuple[Recorded, torch.Tensor]:
    """(Recorded, final stream (B, T, C)) of one pass of ids, nothing changed."""
    B, T = ids.shape
    shape = (len(graph.senders), B, T, model.config.n_embd)
    acts = torch.empty(shape, device=ids.device, dtype=model.tok_emb.weight.dtype)
    state = _State(graph, batch, acts=acts)
    streams = {}  # hook point -> the stream it held

    def keep(x, hook):
        streams[hook.name] = x

    read = {g.stream: keep for g in graph.groups[:-1]}
    ln1 = dict.fromkeys(range(len(graph.mlps)), state.normalized.append)
    with torch.no_grad(), hooks(model, _sender_hooks(model, state)), hooks(model, read):
        with _on_ln1(model, ln1):
            final = model.residual(ids)
    inputs = [streams[g.stream] for g in graph.groups[:-1]] + [final]
    return Recorded(acts, inputs, state.normalized), final


def _receiver(state, index, steps):
    """The hook of the graph's group `index`: each of its receivers reads its Step. The sums of
    differences are one matrix product, coefficients (G, upstream) of -1 (patched, "+") or +1
    (kept, "twin") against the differences (upstream, B·T·C), where that reads less than adding
    them one by one; else they are added in place."""
    group = state.graph.groups[index]
    diff = state.diff[: group.upstream]
    twin_heads = [g for g, s in enumerate(steps) if s is not None and s.kind == "twin"]
    terms = [
        (g, s, -1.0 if step.kind == "+" else 1.0)
        for g, step in enumerate(steps)
        if step
        for s in step.senders
    ]
    weights = None
    if len(terms) > 2 * len(steps):
        g, s, sign = zip(*terms)
        weights = torch.zeros(len(steps), group.upstream, dtype=diff.dtype)
        weights[list(g), list(s)] = torch.tensor(sign, dtype=diff.dtype)
        weights = weights.to(diff.device)
    from_twin = torch.zeros(len(steps), dtype=torch.bool)
    from_twin[twin_heads] = True
    from_twin = from_twin.to(diff.device)[:, None]  # (G, 1)

    def fn(x, hook):
        twin = state.twin.inputs[index]  # (B, T, C)
        if not group.split:
            out = twin.clone() if twin_heads else x.clone()
        elif twin_heads:
            out = torch.where(from_twin, twin[:, :, None], x)  # (B, T, G, C)
        else:
            out = x.clone()
        view = out if group.split else out[:, :, None]  # (B, T, G, C)
        if weights is not None:
            sums = (weights @ diff.flatten(1)).view(len(steps), *diff.shape[1:])  # (G, B, T, C)
            view += sums.permute(1, 2, 0, 3)
        else:
            for g, s, sign in terms:
                view[:, :, g].add_(diff[s], alpha=sign)
        return out

    return fn


def patch(
    model: GPT, graph: Graph, batch: Batch, twin: Recorded, plan: list, start: tuple | None = None
) -> torch.Tensor:
    """The final stream (B, T, C) of the clean input with `plan` (edges.corrections) applied:
    each receiver reads its Step, the senders' differences recomputed as the pass goes. `start`
    (layer, the clean stream entering it, {sender: difference} of senders before it) begins the
    pass at that block, for a plan whose first Step is read there or later."""
    split_inputs(model)
    needed = {s for step in plan if step for s in step.senders}
    layers = {l for l, heads in enumerate(graph.heads) if needed & set(heads)}
    state = _State(graph, batch, twin=twin, needed=needed)
    state.diff = torch.zeros(twin.acts.shape, device=twin.acts.device, dtype=twin.acts.dtype)
    layer, stream, known = start or (0, None, {})
    for sender, value in known.items():
        state.diff[sender] = value
    fns = _sender_hooks(model, state, layers)
    by_group = [plan[g.receivers.start : g.receivers.stop] for g in graph.groups]
    twin_fed = {}  # layers whose heads all read the twin's stream for q, k and v: ln1's hooks
    for l in range(len(graph.heads)):
        steps = [s for g, ss in zip(graph.groups, by_group) if g.layer == l and g.split for s in ss]
        if all(s is not None and s.kind == "twin" and not s.senders for s in steps):
            twin_fed[l] = _replace(twin.normalized[l])
    for index, group in enumerate(graph.groups[:-1]):
        if any(by_group[index]) and not (group.split and group.layer in twin_fed):
            fns[group.point] = _receiver(state, index, by_group[index])
    with torch.no_grad(), hooks(model, fns), _on_ln1(model, twin_fed):
        final = model.residual(batch.clean) if stream is None else model.blocks_from(stream, layer)
    return _receiver(state, len(graph.groups) - 1, plan[-1:])(final, None) if plan[-1] else final


def patch_one(
    model: GPT, graph: Graph, batch: Batch, twin: Recorded, clean: Clean, edge: int
) -> torch.Tensor:
    """The final stream (B, T, C) of the clean input with the one edge `edge` (a flat index
    into (S, R)) patched. Upstream of its receiver the pass is the clean run, so it starts from
    the clean stream at the receiver's block (at its sender's, for a head's write that the
    clean run did not keep): an edge into the logits costs no block at all."""
    u, r = divmod(edge, len(graph.receivers))
    plan = [None] * len(graph.receivers)
    plan[r] = Step("+", [u])
    to = next(g.layer for g in graph.groups if r in g.receivers)
    head = next((l for l, heads in enumerate(graph.heads) if u in heads), None)
    layer = to if head is None or head == to else head
    known = {u: clean.writes[u] - twin.acts[u]} if head is None else {}
    return patch(model, graph, batch, twin, plan, (layer, clean.streams[layer], known))


def _replace(value):
    """A hook on ln1's output (_on_ln1) that hands on `value` in place of what it sees."""
    return lambda output: value


@contextmanager
def _on_ln1(model: GPT, fns: dict[int, Callable]) -> Iterator[None]:
    """PyTorch forward hooks fn(output) on ln1 of the layers `fns` names ({layer: fn}; one
    returning a tensor replaces ln1's output): whatever module ln1 is, an nn.Identity too."""
    handles = [
        model.blocks[l].ln_1.register_forward_hook(lambda m, args, out, fn=fn: fn(out))
        for l, fn in fns.items()
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def attribute(
    model: GPT, graph: Graph, batch: Batch, twin: Recorded
) -> tuple[torch.Tensor, torch.Tensor, Clean]:
    """(scores (B, S, R) in float64: each edge's first-order estimate of LD(edge patched) -
    LD(clean), 0 where no edge is; the clean LDs (B,); the Clean run) from one forward and one
    backward pass."""
    split_inputs(model)
    S, R = graph.allowed.shape
    B, T = batch.clean.shape
    acts = torch.empty(twin.acts.shape, device=twin.acts.device, dtype=twin.acts.dtype)
    state = _State(graph, batch, acts=acts)
    scores = torch.zeros(B, S, R, dtype=torch.float64, device=acts.device)
    diff = {}  # "d": twin - clean (B, S, T·C), known once the forward pass is done

    def meet(group: Group, grad):  # grad (B, T, G, C) -> (B, upstream, G) scores
        g = grad.permute(0, 1, 3, 2).reshape(B, -1, grad.size(2))  # (B, T·C, G)
        part = torch.bmm(diff["d"][:, : group.upstream], g)
        scores[:, : group.upstream, group.receivers.start : group.receivers.stop] += part.double()

    def receiver(group):
        def fn(x, hook):
            x = x.clone()  # q, k and v share one tensor: each copy gets its own gradient
            x.register_hook(lambda g: meet(group, g if group.split else g[:, :, None]))
            return x

        return fn

    fns = _sender_hooks(model, state, grad=True)
    for group in graph.groups[:-1]:
        fns[group.point] = receiver(group)
    streams = []
    entering = {f"blocks.{l}.hook_resid_pre" for l in range(len(graph.heads))}
    keep = {lambda name: name in entering: lambda x, hook: streams.append(x.detach())}
    with torch.enable_grad(), hooks(model, fns), hooks(model, keep):
        final = model.residual(batch.clean)
        ld = lds(model, [receiver(graph.groups[-1])(final, None)], [batch])
    diff["d"] = (twin.acts - acts).transpose(0, 1).reshape(B, S, -1)  # (B, S, T·C)
    torch.autograd.grad(ld.sum(), [state.leaf])  # each example's LD depends on its own row only
    writes = {s: acts[s].clone() for s in [0, 1] + graph.mlps}
    return scores, ld.detach(), Clean(streams + [final.detach()], writes)


def lds(model: GPT, finals: list[torch.Tensor], batches: list[Batch]) -> torch.Tensor:
    """The logit difference at the pronoun, clean next - twin's next, of every row of `batches`
    (their order), read from their final streams (B, T, C) through GPT.unembed at that position
    only (as the logit lens reads it), one call for all of them."""
    rows = torch.cat(
        [f[torch.arange(len(f), device=f.device), b.last] for f, b in zip(finals, batches)]
    )
    logits = model.unembed(rows)  # (N, C) -> (N, V)
    n = torch.arange(len(rows), device=rows.device)
    clean = torch.cat([b.clean_next for b in batches])
    corrupt = torch.cat([b.corrupt_next for b in batches])
    return logits[n, clean] - logits[n, corrupt]
