"""The model as a graph of edges, and the two ways to measure one: attribution and patching.

Senders write into the residual stream, receivers read it (names as in model.hooks):

    senders    embed:antecedent, embed:other   the embeddings (blocks.0.hook_resid_pre: tokens
                                               plus positions) at the antecedent's tokens, and
                                               at every other position
               L{l}H{h}                        head h's write (attn.hook_result[:, :, h])
               MLP{l}                          the MLP's write (hook_mlp_out)
    receivers  L{l}H{h}.q / .k / .v            head h's own copy of the stream for its query,
                                               key, value (hook_q_input[:, :, h], ...)
               MLP{l}                          the MLP's own copy (hook_mlp_in)
               logits                          the final stream (blocks.{L-1}.hook_resid_post,
                                               which only the final LayerNorm reads)

An edge u -> v exists where u is upstream of v. The stream a receiver reads is the sum of its
senders' writes plus constants (the biases: W_O's is not in hook_result, and it is the same in
every run), so patching the edge u -> v from the twin means: receiver v reads its input minus
(a_u(this run) - a_u(twin)), and nothing else changes there. With a SET of edges patched, every
receiver is corrected by the differences of its patched senders, each sender's activation of
THIS run recomputed as the pass goes (ACDC's semantics, Conmy et al. 2023). With every edge
patched every receiver reads the twin's stream, so the logits are the twin's.

Edge attribution patching (Syed et al. 2023) estimates every edge's effect at once, to first
order: score(u -> v) = sum over positions of (a_u(twin) - a_u(clean)) . dLD/d(input_v), the
gradient taken on the clean run; one clean forward and backward and one twin forward in all.
It estimates LD(edge patched) - LD(clean), per example.

Letters: N examples, B batch, T tokens, C channels, H heads, L layers, S senders, R receivers.
"""

from typing import NamedTuple

import torch

from model.hooks import hooks

EMBED = ("embed:antecedent", "embed:other")
SPLIT = ("hook_q_input", "hook_k_input", "hook_v_input")
# The senders' activations of one batch are held as one (S, B, T, C) tensor; batches are cut so
# that it stays under this many numbers (a GPT-2-sized graph holds 158 senders).
BUFFER_NUMBERS = 1 << 25


class Graph(NamedTuple):
    senders: list[str]
    receivers: list[str]
    allowed: torch.Tensor  # (S, R) bool: sender s is upstream of receiver r
    groups: list[tuple]  # (hook name, receiver indices, upstream senders n): senders[:n] feed it


def build_graph(n_layer: int, n_head: int) -> Graph:
    """The graph of an n_layer x n_head model, senders and receivers in the order they fire."""
    senders, receivers, groups, depth_s, depth_r = list(EMBED), [], [], [-1.0, -1.0], []
    for l in range(n_layer):
        up = len(senders)
        for part in "qkv":
            heads = list(range(len(receivers), len(receivers) + n_head))
            groups.append((f"blocks.{l}.hook_{part}_input", heads, up))
            receivers += [f"L{l}H{h}.{part}" for h in range(n_head)]
            depth_r += [l] * n_head
        senders += [f"L{l}H{h}" for h in range(n_head)]
        depth_s += [l] * n_head
        groups.append((f"blocks.{l}.hook_mlp_in", [len(receivers)], len(senders)))
        receivers.append(f"MLP{l}")
        depth_r.append(l + 0.5)
        senders.append(f"MLP{l}")
        depth_s.append(l + 0.5)
    groups.append((f"blocks.{n_layer - 1}.hook_resid_post", [len(receivers)], len(senders)))
    receivers.append("logits")
    depth_r.append(n_layer)
    allowed = torch.tensor(depth_s)[:, None] < torch.tensor(depth_r)[None, :]  # (S, R)
    return Graph(senders, receivers, allowed, groups)


class Batch(NamedTuple):
    """Pairs of one kind, padded on the right to one length: a causal model's positions up to
    the pronoun never see what follows, so the padding changes nothing that is measured."""

    clean: torch.Tensor  # (B, T) ids up to the pronoun, then padding
    corrupt: torch.Tensor  # (B, T) the twins
    antecedent: torch.Tensor  # (B, T) bool: the antecedent's tokens
    last: torch.Tensor  # (B,) the pronoun's position, where the LD is read
    clean_next: torch.Tensor  # (B,)
    corrupt_next: torch.Tensor  # (B,)
    rows: list[int]  # the pairs' indices in the list they came from


PAD_SLACK = 4  # a batch's pairs are at most this many tokens longer than its shortest


def make_batches(pairs, kinds, n_senders, n_embd, device) -> list[Batch]:
    """`pairs` (analysis.patching.Pair) grouped by kind, so that any kind's set is a union of
    batches; by length within a kind (PAD_SLACK), each batch cut to hold at most BUFFER_NUMBERS
    sender activations."""
    by_kind: dict[str, list[int]] = {}
    for i, kind in enumerate(kinds):
        by_kind.setdefault(str(kind), []).append(i)
    batches = []
    for rows in by_kind.values():
        rows = sorted(rows, key=lambda i: len(pairs[i].clean))
        while rows:
            shortest = len(pairs[rows[0]].clean)
            fit = [i for i in rows if len(pairs[i].clean) <= shortest + PAD_SLACK]
            T = len(pairs[fit[-1]].clean)
            part = fit[: max(1, BUFFER_NUMBERS // (n_senders * T * n_embd))]
            rows = rows[len(part) :]
            batches.append(_batch([pairs[i] for i in part], part, T, device))
    return batches


def _batch(part, rows, T, device):
    where = torch.zeros(len(part), T, dtype=torch.bool)
    for b, p in enumerate(part):
        where[b, p.antecedent] = True

    def tensor(xs):
        return torch.tensor(xs, device=device)

    def pad(ids):
        return ids + [0] * (T - len(ids))

    return Batch(
        tensor([pad(p.clean) for p in part]),
        tensor([pad(p.corrupt) for p in part]),
        where.to(device),
        tensor([len(p.clean) - 1 for p in part]),
        tensor([p.clean_next for p in part]),
        tensor([p.corrupt_next for p in part]),
        rows,
    )


class _FinalStream(Exception):
    """Raised by the logits receiver's hook to end the pass there, carrying the final stream."""

    def __init__(self, stream):
        super().__init__()
        self.stream = stream


def _ld(model, stream, batch):
    """(B,) the logit difference at the pronoun, read from the final stream (B, T, C): the
    unembedding of that position only (as the logit lens reads it), where the model's own pass
    would unembed every position, a third of a GPT-2-sized model's work."""
    b = torch.arange(stream.size(0), device=stream.device)
    logits = model.lm_head(model.ln_f(stream[b, batch.last]))  # (B, C) -> (B, padded V)
    return logits[b, batch.clean_next] - logits[b, batch.corrupt_next]


def corrections(graph, patched):
    """For each receiver, how to sum its patched senders' differences: None (none patched),
    ("+", senders) to add them, or ("-", senders) to take the others from the sum of all its
    upstream senders', whichever adds fewer tensors (every edge patched costs one per
    receiver, as one edge does)."""
    plan = []
    for _, rows, up in graph.groups:
        for r in rows:
            on = patched[:up, r]
            n = int(on.sum())
            if n == 0:
                plan.append(None)
            elif n <= up - n:
                plan.append(("+", on.nonzero().flatten().tolist()))
            else:
                plan.append(("-", (~on).nonzero().flatten().tolist()))
    return plan


def _run(model, graph, batch, ids, twin=None, plan=None, on_grad=None):
    """One pass of `ids` with every sender recorded and every receiver hooked. With `twin`
    ((S, B, T, C) activations of the twin run) and `plan` (corrections()), each receiver reads
    its input minus its patched senders' differences a(this run) - a(twin). With `on_grad`, the
    pass keeps autograd's graph from the embeddings on, and each receiver's input gradient is
    handed to on_grad(group, gradient (B, T, G, C)) during the backward pass. Returns (LD (B,),
    the senders' activations (S, B, T, C) or None when patching, the embeddings leaf or None)."""
    H = model.config.n_head
    S = len(graph.senders)
    B, T = ids.shape
    dtype = model.tok_emb.weight.dtype
    acts = (
        None
        if plan is not None
        else torch.empty(S, B, T, model.config.n_embd, device=ids.device, dtype=dtype)
    )
    delta, state = [None] * S, {"leaf": None, "total": 0.0}

    def record(first, value):  # value (n, B, T, C): senders first .. first + n - 1
        if acts is not None:
            acts[first : first + len(value)] = value.detach()
        else:
            d = value - twin[first : first + len(value)]
            state["total"] = state["total"] + d.sum(0)
            delta[first : first + len(value)] = list(d)

    def embed(x, hook):
        if on_grad is not None:
            x = state["leaf"] = x.detach().requires_grad_(True)
        where = batch.antecedent[..., None]  # (B, T, 1)
        record(0, torch.stack((x * where, x * ~where)))
        return x

    def head_writes(first):
        return lambda x, hook: record(first, x.permute(2, 0, 1, 3))  # (B, T, H, C) -> (H, ...)

    def mlp_write(first):
        return lambda x, hook: record(first, x[None])

    def receiver(group, steps):
        name, rows, up = group
        split = name.endswith(SPLIT)

        def fn(x, hook):
            if any(steps):
                corr = [_correction(step, delta, state["total"], x) for step in steps]
                corr = torch.stack(corr, 2) if split else corr[0]  # (B, T, G, C) or (B, T, C)
                x = x - corr
            if on_grad is not None:
                x = x.clone()  # q, k and v share one tensor: each copy gets its own gradient
                x.register_hook(lambda g: on_grad(group, g if split else g[:, :, None]))
            if group is graph.groups[-1]:
                raise _FinalStream(x)
            return x

        return fn

    # What is hooked changes what is computed: a hooked hook_result computes each head's write
    # apart, a hooked q, k or v input each head's own copy of the stream. Where a patch needs
    # neither (no sender of that layer's heads, no receiver of its q, k, v), the layer runs as
    # it does unhooked; the twins' runs and attribution hook everything.
    needed = _needed_senders(plan, S)
    fns = {"blocks.0.hook_resid_pre": embed}
    for l in range(model.config.n_layer):
        first = 2 + l * (H + 1)
        if needed is None or needed & set(range(first, first + H)):
            fns[f"blocks.{l}.attn.hook_result"] = head_writes(first)
        fns[f"blocks.{l}.hook_mlp_out"] = mlp_write(first + H)
    start = 0
    for group in graph.groups:
        steps = (plan or [None] * len(graph.receivers))[start : start + len(group[1])]
        start += len(group[1])
        if any(steps) or on_grad is not None or not group[0].endswith(SPLIT):
            fns[group[0]] = receiver(group, steps)
    with torch.set_grad_enabled(on_grad is not None), hooks(model, fns):
        try:
            model(ids)
        except _FinalStream as end:
            ld = _ld(model, end.stream, batch)
    return ld, acts, state["leaf"]


def _needed_senders(plan, n_senders):
    """The senders whose differences `plan` reads (all of them where a receiver takes the
    others from the sum), or None where every sender is recorded (no plan)."""
    if plan is None or any(step and step[0] == "-" for step in plan):
        return None
    return {s for step in plan if step for s in step[1]}


def _correction(step, delta, total, x):
    """One receiver's sum of patched differences (B, T, C), as corrections() planned it."""
    if step is None:
        return torch.zeros_like(x[:, :, 0] if x.dim() == 4 else x)
    sign, senders = step
    out = total.clone() if sign == "-" else torch.zeros_like(delta[senders[0]])
    for s in senders:
        out = out.sub_(delta[s]) if sign == "-" else out.add_(delta[s])
    return out


@torch.no_grad()
def twin_runs(model, graph, batches) -> tuple[list[torch.Tensor], torch.Tensor]:
    """The twins' sender activations, one (S, B, T, C) tensor per batch, and their LDs (N,)."""
    n = sum(len(b.rows) for b in batches)
    lds, acts = torch.full((n,), float("nan"), dtype=torch.float64), []
    for batch in batches:
        ld, a, _ = _run(model, graph, batch, batch.corrupt)
        lds[batch.rows] = ld.double().cpu()
        acts.append(a)
    return acts, lds


@torch.no_grad()
def patched_lds(model, graph, batches, twins, patched: torch.Tensor, only=None) -> torch.Tensor:
    """(N,) each example's LD on its clean input with the (S, R) bool `patched` edges patched
    from its twin (NaN for rows of the batches not in `only`, a set of batch indices)."""
    n = sum(len(b.rows) for b in batches)
    out = torch.full((n,), float("nan"), dtype=torch.float64)
    plan = corrections(graph, patched & graph.allowed)
    for i, (batch, twin) in enumerate(zip(batches, twins)):
        if only is None or i in only:
            out[batch.rows] = _run(model, graph, batch, batch.clean, twin, plan)[0].double().cpu()
    return out


def attribution(model, graph, batches, twins) -> tuple[torch.Tensor, torch.Tensor]:
    """Edge attribution patching: (N, S, R) each example's first-order estimate of LD(edge
    patched) - LD(clean), 0 where no edge is, and the clean LDs (N,)."""
    n = sum(len(b.rows) for b in batches)
    S, R = graph.allowed.shape
    scores = torch.zeros(n, S, R, dtype=torch.float64)
    lds = torch.zeros(n, dtype=torch.float64)
    for batch, twin in zip(batches, twins):
        delta = {}  # twin - clean, known once the forward pass is done

        def on_grad(group, grad):
            _, rows, up = group
            part = torch.einsum("sbtc,btgc->bsg", delta["d"][:up], grad)  # (B, up, G)
            scores[batch.rows, :up, rows[0] : rows[-1] + 1] += part.double().cpu()

        ld, clean, leaf = _run(model, graph, batch, batch.clean, on_grad=on_grad)
        delta["d"] = twin - clean  # (S, B, T, C)
        torch.autograd.grad(ld.sum(), [leaf])  # each example's LD depends on its own row only
        lds[batch.rows] = ld.detach().double().cpu()
    return scores * graph.allowed, lds
