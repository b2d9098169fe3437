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

This module holds the graph, the batches and the plan of a patch; analysis/edge_runs.py runs
them through the model.

Letters: N examples, B batch, T tokens, C channels, H heads, L layers, S senders, R receivers.
"""

from typing import NamedTuple

import torch

EMBED = ("embed:antecedent", "embed:other")
SPLIT = ("hook_q_input", "hook_k_input", "hook_v_input")
# The senders' activations of one batch are held as one (S, B, T, C) tensor; batches are cut so
# that it stays under this many numbers (a GPT-2-sized graph holds 158 senders).
BUFFER_NUMBERS = 1 << 25


class Group(NamedTuple):
    """Receivers read at one hook point: a layer's heads' query (or key, or value) inputs, a
    layer's MLP input, or the final stream."""

    point: str  # the hook point they read (blocks.{l}.hook_q_input, ...)
    receivers: range  # their indices in Graph.receivers
    upstream: int  # senders[:upstream] are upstream of each of them
    layer: int  # the block they read in (n_layer for the final stream)

    @property
    def split(self) -> bool:
        """Whether the point holds one copy of the stream per head (B, T, H, C)."""
        return self.point.endswith(SPLIT)

    @property
    def stream(self) -> str:
        """The point holding, unsplit (B, T, C), the stream these receivers read."""
        return f"blocks.{self.layer}.hook_resid_pre" if self.split else self.point


class Graph(NamedTuple):
    senders: list[str]
    receivers: list[str]
    allowed: torch.Tensor  # (S, R) bool: sender s is upstream of receiver r
    groups: list[Group]  # in the order the model reads them
    heads: list[range]  # heads[l]: layer l's heads as senders
    mlps: list[int]  # mlps[l]: layer l's MLP as a sender


def build_graph(n_layer: int, n_head: int) -> Graph:
    """The graph of an n_layer x n_head model, senders and receivers in the order they fire."""
    senders, receivers, groups, heads, mlps = list(EMBED), [], [], [], []
    depth_s, depth_r = [-1.0, -1.0], []
    for l in range(n_layer):
        up = len(senders)
        for part in "qkv":
            at = len(receivers)
            groups.append(Group(f"blocks.{l}.hook_{part}_input", range(at, at + n_head), up, l))
            receivers += [f"L{l}H{h}.{part}" for h in range(n_head)]
            depth_r += [l] * n_head
        heads.append(range(len(senders), len(senders) + n_head))
        senders += [f"L{l}H{h}" for h in range(n_head)]
        depth_s += [l] * n_head
        at = len(receivers)
        groups.append(Group(f"blocks.{l}.hook_mlp_in", range(at, at + 1), len(senders), l))
        receivers.append(f"MLP{l}")
        depth_r.append(l + 0.5)
        mlps.append(len(senders))
        senders.append(f"MLP{l}")
        depth_s.append(l + 0.5)
    at = len(receivers)
    final = f"blocks.{n_layer - 1}.hook_resid_post"
    groups.append(Group(final, range(at, at + 1), len(senders), n_layer))
    receivers.append("logits")
    depth_r.append(n_layer)
    allowed = torch.tensor(depth_s)[:, None] < torch.tensor(depth_r)[None, :]  # (S, R)
    return Graph(senders, receivers, allowed, groups, heads, mlps)


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


def make_batches(
    pairs: list, kinds: list, n_senders: int, n_embd: int, device: torch.device | str
) -> list[Batch]:
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


class Step(NamedTuple):
    """How one receiver reads its input when some of its edges are patched: "+" its input in
    this run minus the patched senders' differences a(this run) - a(twin); "twin" the twin's
    input plus the kept (unpatched) senders' differences. The two are the same sum (a receiver's
    input is the sum of its senders' writes plus the biases, the same in both runs); a plan takes
    the one that adds fewer tensors, and a receiver with every edge patched reads the twin's
    input as it is."""

    kind: str  # "+" or "twin"
    senders: list[int]


def corrections(graph: Graph, patched: torch.Tensor) -> list[Step | None]:
    """For each receiver, its Step under the (S, R) bool `patched` edges, or None where none of
    its edges is patched."""
    plan = []
    for group in graph.groups:
        for r in group.receivers:
            on = patched[: group.upstream, r]
            n = int(on.sum())
            if n == 0:
                plan.append(None)
            elif n <= group.upstream - n:
                plan.append(Step("+", on.nonzero().flatten().tolist()))
            else:
                plan.append(Step("twin", (~on).nonzero().flatten().tolist()))
    return plan
