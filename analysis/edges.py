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
            groups.append((f"blocks.{l}.hook_{part}_input", list(range(len(receivers),
                                                                       len(receivers) + n_head)), up))
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
    """Pairs of one token length (and one kind), as tensors."""

    clean: torch.Tensor  # (B, T) ids up to the pronoun
    corrupt: torch.Tensor  # (B, T) the twins
    antecedent: torch.Tensor  # (B, T) bool: the antecedent's tokens
    clean_next: torch.Tensor  # (B,)
    corrupt_next: torch.Tensor  # (B,)
    rows: list[int]  # the pairs' indices in the list they came from


def make_batches(pairs, kinds, n_senders, n_embd, device) -> list[Batch]:
    """`pairs` (analysis.patching.Pair) grouped by kind and token length, so that any kind's set
    is a union of batches, each cut to hold at most BUFFER_NUMBERS sender activations."""
    groups: dict[tuple, list[int]] = {}
    for i, (p, kind) in enumerate(zip(pairs, kinds)):
        groups.setdefault((str(kind), len(p.clean)), []).append(i)
    batches = []
    for (_, T), rows in sorted(groups.items()):
        size = max(1, BUFFER_NUMBERS // (n_senders * T * n_embd))
        for start in range(0, len(rows), size):
            part = [pairs[i] for i in rows[start:start + size]]
            where = torch.zeros(len(part), T, dtype=torch.bool)
            for b, p in enumerate(part):
                where[b, p.antecedent] = True
            tensor = lambda xs: torch.tensor(xs, device=device)  # noqa: E731
            batches.append(Batch(tensor([p.clean for p in part]), tensor([p.corrupt for p in part]),
                                 where.to(device), tensor([p.clean_next for p in part]),
                                 tensor([p.corrupt_next for p in part]), rows[start:start + size]))
    return batches


def _ld(logits, batch):
    """(B,) the logit difference at the last position: clean next - twin's next."""
    last = logits[:, -1]
    b = torch.arange(last.size(0), device=last.device)
    return last[b, batch.clean_next] - last[b, batch.corrupt_next]


def _run(model, graph, batch, ids, twin=None, patched=None, on_grad=None):
    """One pass of `ids` with every sender recorded and every receiver hooked. With `twin`
    ((S, B, T, C) activations of the twin run) and `patched` ((S, R) bool), each receiver reads
    its input corrected by its patched senders' differences. With `on_grad`, the pass keeps
    autograd's graph from the embeddings on, and each receiver's input gradient is handed to
    on_grad(group, gradient (B, T, G, C)) during the backward pass. Returns (LD (B,), the
    senders' activations (S, B, T, C), the embeddings leaf or None)."""
    L, H = model.config.n_layer, model.config.n_head
    acts = [None] * len(graph.senders)
    state = {"leaf": None}

    def embed(x, name):
        if on_grad is not None:
            x = state["leaf"] = x.detach().requires_grad_(True)
        where = batch.antecedent[..., None]  # (B, T, 1)
        acts[0], acts[1] = (x * where).detach(), (x * ~where).detach()
        return x

    def head_writes(l):
        def fn(x, name):  # (B, T, H, C)
            for h in range(H):
                acts[2 + l * (H + 1) + h] = x[:, :, h].detach()
        return fn

    def mlp_write(l):
        def fn(x, name):
            acts[2 + l * (H + 1) + H] = x.detach()
        return fn

    def receiver(group):
        name, rows, up = group
        split = name.endswith(("q_input", "k_input", "v_input"))

        def fn(x, name):
            if patched is not None:
                sub = patched[:up, rows]  # (up, G)
                used = sub.any(1).nonzero().flatten().tolist()
                if used:
                    delta = torch.stack([acts[s] - twin[s] for s in used])  # (U, B, T, C)
                    corr = torch.einsum("ubtc,ug->btgc", delta, sub[used].to(delta.dtype))
                    x = x - (corr if split else corr[:, :, 0])
            if on_grad is not None:
                x = x.clone()  # q, k and v share one tensor: each copy gets its own gradient
                x.register_hook(lambda g: on_grad(group, g if split else g[:, :, None]))
            return x
        return fn

    fns = {"blocks.0.hook_resid_pre": embed}
    for l in range(L):
        fns[f"blocks.{l}.attn.hook_result"] = head_writes(l)
        fns[f"blocks.{l}.hook_mlp_out"] = mlp_write(l)
    for group in graph.groups:
        fns[group[0]] = receiver(group)
    with torch.set_grad_enabled(on_grad is not None), hooks(model, fns):
        ld = _ld(model(ids), batch)
    return ld, torch.stack(acts), state["leaf"]


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
    patched = patched & graph.allowed
    for i, (batch, twin) in enumerate(zip(batches, twins)):
        if only is None or i in only:
            out[batch.rows] = _run(model, graph, batch, batch.clean, twin, patched)[0].double().cpu()
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
            scores[batch.rows, :up, rows[0]:rows[-1] + 1] += part.double().cpu()

        ld, clean, leaf = _run(model, graph, batch, batch.clean, on_grad=on_grad)
        delta["d"] = twin - clean  # (S, B, T, C)
        torch.autograd.grad(ld.sum(), [leaf])  # each example's LD depends on its own row only
        lds[batch.rows] = ld.detach().double().cpu()
    return scores * graph.allowed, lds
