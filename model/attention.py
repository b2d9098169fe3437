"""Scaled dot-product attention, written so it reads beside the equations.

    Q = x W_Q,   K = x W_K,   V = x W_V
    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V

Two options (GPTConfig.qk_norm, .rotary) change each head's q and k before the scores: divided
by their root mean square, and rotated by their positions. The equation is the same after that.

Letters used in shape comments: B batch, T query positions, S key positions, C channels
(n_embd), H heads, D head size (d_k = C / H), L layers.

Looking inside. There is one way to see or change what attention does: `inspect_attention`.

    with inspect_attention(model, knockout={0: blocked}, ablate={1: (where, value)}) as seen:
        logits = model(idx)                  # still (B, T, V)
    seen.weights[l], seen.outputs[l]         # layer l's (B, H, T, S) weights, (B, H, T, D) heads

While the `with` block lasts, every CausalSelfAttention in `model` (layers numbered in module
order, which is the order a GPT runs them) takes the explicit path built from the equations,
through `Inspection.attend`, which can:
- knock keys out: knockout {layer: blocked}, blocked a bool tensor broadcastable to (B, H, T, S),
  True where query t of head h in batch row b may not attend key s. Blocked keys are masked
  with the causal ones before the softmax, so the row renormalises over the keys left; a row
  left with no key at all is a ValueError;
- replace heads' outputs: ablate {layer: (where, value)}, where bool broadcastable to (B, H, T)
  and value broadcastable to (B, H, T, D): where it is True, head h's output at (b, t) becomes
  value, before the heads are joined and W_O applied (mean-ablation passes a mean there);
- patch the residual stream: patch {i: (where, value)}, where bool broadcastable to (B, T) and
  value to (B, T, C): the stream entering block i (i = n_layer: leaving the last block, what
  the final LayerNorm and the unembedding read) becomes value where `where` is True. A GPT's
  blocks call Inspection.residual through their attention module's inspector;
- record, per layer, the weights (after knockout) and the heads' outputs (after ablation), and
  the residual stream at each of the n_layer + 1 points (after patching), from the latest
  forward pass: seen.stream[i] (B, T, C). Edits and records keep autograd's graph.
With no inspection installed the module runs PyTorch's fused kernel and nothing else changes.
The attention maps, the probe and the causal tests (analysis/causal.py) all look this way.
"""

import math
from contextlib import contextmanager

import torch
import torch.nn as nn
import torch.nn.functional as F


def attention(q, k, v, mask=None, scale=None):
    """Return (out, weights) for queries q (..., T, D), keys k (..., S, D), values v (..., S, Dv).

    scores = q·kᵀ · scale, with scale = 1/√d_k unless given; where the boolean `mask`
    (broadcastable to (..., T, S)) is False the weight is exactly 0; weights = softmax over
    the keys; out = weights·v. Any leading batch/head dimensions are carried through.
    """
    d_k = q.size(-1)
    if scale is None:
        scale = 1.0 / math.sqrt(d_k)
    scores = (q @ k.transpose(-2, -1)) * scale  # (..., T, D) @ (..., D, S) -> (..., T, S)
    if mask is not None:
        # -inf becomes an exact 0 after exp(), so masked keys contribute nothing.
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # each row sums to 1 over the keys
    out = weights @ v  # (..., T, S) @ (..., S, Dv) -> (..., T, Dv)
    return out, weights


class KVCache:
    """Keys and values of the positions a layer has already seen, for incremental decoding.

    Preallocated to the model's block_size so a decoding step writes in place instead of
    concatenating; `length` is how many positions are filled (the same for every layer).
    """

    def __init__(self, batch_size, n_head, block_size, head_size, device=None, dtype=None):
        shape = (batch_size, n_head, block_size, head_size)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.length = 0

    def append(self, k, v):
        """Store k, v of shape (B, H, T, D) after the filled part; return all keys and values so far."""
        start, end = self.length, self.length + k.size(2)
        if end > self.k.size(2):
            raise ValueError(f"KV cache holds {self.k.size(2)} positions; cannot append up to {end}")
        self.k[:, :, start:end] = k
        self.v[:, :, start:end] = v
        self.length = end
        return self.k[:, :, :end], self.v[:, :, :end]


def rotary_angles(positions, head_size, base=10000.0):
    """(cos, sin), each (positions, head_size / 2): position p turns channel pair i by the angle
    p · base^(-2i / head_size), fast for the first pairs, slow for the last (RoFormer)."""
    inv_freq = base ** -(torch.arange(0, head_size, 2, dtype=torch.float32) / head_size)  # (D/2,)
    angles = torch.arange(positions, dtype=torch.float32)[:, None] * inv_freq  # (P, D/2)
    return angles.cos(), angles.sin()


def rotate(x, cos, sin):
    """Rotate x (..., T, D) pair by pair, pairing channel i with channel i + D/2, by the angles
    of its T positions: cos, sin (T, D/2). Then q·k depends on positions only through their
    difference, so attention sees relative positions without a position table."""
    x1, x2 = x.chunk(2, dim=-1)  # (..., T, D/2) each
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).type_as(x)


def causal_mask(start, T, S, device=None):
    """(T, S) bool: query i, at absolute position start + i, may see keys 0 .. start + i.

    Made when a path needs it (the explicit one, or several new positions after a KV cache),
    not kept as a (block_size, block_size) buffer per layer: training's fused path needs none,
    and GPT-2's twelve 1024² masks would cost more than loading its weights."""
    return torch.ones(T, S, dtype=torch.bool, device=device).tril(diagonal=start)


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where position t only sees positions ≤ t.

    Two paths compute the same function: the explicit one calls `attention` above and is taken
    while an inspection is installed (`inspect_attention`); the fused one calls PyTorch's
    scaled_dot_product_attention, which never materialises the (T, T) weights and is the one
    used for training and sampling.
    """

    def __init__(self, n_embd, n_head, dropout=0.0, bias=True, qk_norm=False, rotary_positions=0):
        """qk_norm: RMS-normalise every head's q and k (no gain) before QKᵀ, so no score can grow
        past √d_k. rotary_positions > 0: rotate q and k by their positions 0 .. rotary_positions-1
        (`rotate`); the model then needs no position table."""
        super().__init__()
        self.n_head = n_head
        self.head_size = n_embd // n_head
        self.qk_norm = qk_norm
        self.rotary = rotary_positions > 0
        if self.rotary:
            cos, sin = rotary_angles(rotary_positions, self.head_size)
            self.register_buffer("rotary_cos", cos, persistent=False)  # (P, D/2)
            self.register_buffer("rotary_sin", sin, persistent=False)  # (P, D/2)
        # W_Q, W_K and W_V stacked side by side: one (C, 3C) matmul instead of three (C, C).
        self.w_qkv = nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.w_out = nn.Linear(n_embd, n_embd, bias=bias)
        self.dropout = dropout
        self.resid_dropout = nn.Dropout(dropout)
        self.inspector = None  # (Inspection, layer index) while inspect_attention runs

    def forward(self, x, cache=None):
        """x (B, T, C) -> (B, T, C).

        With a KVCache, x holds the T newest positions; keys and values of earlier positions
        come from the cache, and this call's keys and values are added to it.
        """
        B, T, C = x.shape
        q, k, v = self.w_qkv(x).split(C, dim=2)  # Q = xW_Q, K = xW_K, V = xW_V, each (B, T, C)
        q = q.view(B, T, self.n_head, self.head_size).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
        k = k.view(B, T, self.n_head, self.head_size).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
        v = v.view(B, T, self.n_head, self.head_size).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
        start = cache.length if cache is not None else 0
        if self.qk_norm:  # type_as: autocast on CUDA norms in float32; the kernel wants v's dtype
            q = F.rms_norm(q, (self.head_size,)).type_as(v)
            k = F.rms_norm(k, (self.head_size,)).type_as(v)
        if self.rotary:  # positions start .. start+T-1; cached keys were rotated when they came
            cos, sin = self.rotary_cos[start : start + T], self.rotary_sin[start : start + T]
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, H, S, D) with S = start + T
        S = k.size(2)

        dropout_p = self.dropout if self.training else 0.0
        if self.inspector is not None:
            inspection, layer = self.inspector
            out = inspection.attend(layer, q, k, v, causal_mask(start, T, S, x.device), dropout_p)  # (B, H, T, D)
        elif start == 0:
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
        elif T == 1:  # one new position sees every cached key: nothing to mask
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
        else:  # several new positions after a cache: not the square lower triangle
            mask = causal_mask(start, T, S, x.device)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        out = out.transpose(1, 2).contiguous().view(B, T, C)  # (B, H, T, D) -> (B, T, C): concat heads
        return self.resid_dropout(self.w_out(out))


class Inspection:
    """What an inspect_attention block changes inside attention, and what it saw (see the
    module docstring). weights[l] and outputs[l] are None until layer l has run."""

    def __init__(self, n_layer, knockout=None, ablate=None, patch=None):
        self.n_layer = n_layer
        self.knockout = dict(knockout or {})
        self.ablate = dict(ablate or {})
        self.patch = dict(patch or {})
        for name, edits, top in (("knockout", self.knockout, n_layer), ("ablate", self.ablate, n_layer),
                                 ("patch", self.patch, n_layer + 1)):
            bad = [layer for layer in edits if layer not in range(top)]
            if bad:
                raise ValueError(f"{name} names layer(s) {bad}; the model has layers 0..{top - 1}")
        self.weights = [None] * n_layer  # (B, H, T, S) per layer
        self.outputs = [None] * n_layer  # (B, H, T, D) per layer
        self.stream = [None] * (n_layer + 1)  # (B, T, C) entering each block, and leaving the last

    def residual(self, i, x):
        """The residual stream at point i (0: entering block 0, ..., n_layer: leaving the last
        block), patched where patch[i] = (where (B, T) bool, value (B, T, C)) says, recorded."""
        if i in self.patch:
            where, value = self.patch[i]
            x = torch.where(where[..., None], value, x)  # (B, T, 1) picks value or x
        self.stream[i] = x
        return x

    def attend(self, layer, q, k, v, mask, dropout_p=0.0):
        """The explicit path for one layer: (B, H, T, D) heads' outputs, edited and recorded."""
        blocked = self.knockout.get(layer)
        if blocked is not None:
            mask = mask & ~blocked  # (T, S) & (B, H, T, S) -> (B, H, T, S)
            if not mask.any(-1).all():
                raise ValueError(f"knockout in layer {layer} leaves a query with no key to attend "
                                 "to; keep at least one key per query (its own position)")
        out, weights = attention(q, k, v, mask=mask)  # (B, H, T, D), (B, H, T, S)
        if dropout_p > 0.0:  # dropout on the weights, where the fused path applies it
            out = F.dropout(weights, dropout_p) @ v
        if layer in self.ablate:
            where, value = self.ablate[layer]
            out = torch.where(where[..., None], value, out)  # (B, H, T, 1) picks value or out
        self.weights[layer], self.outputs[layer] = weights, out
        return out


@contextmanager
def inspect_attention(model, knockout=None, ablate=None, patch=None):
    """Install an Inspection on every CausalSelfAttention of `model` for the `with` block and
    yield it; the modules take the explicit path until the block ends (see the module
    docstring). One inspection at a time: nesting is a ValueError."""
    layers = [m for m in model.modules() if isinstance(m, CausalSelfAttention)]
    if not layers:
        raise ValueError(f"{type(model).__name__} has no CausalSelfAttention to inspect")
    if any(m.inspector is not None for m in layers):
        raise ValueError("this model is already being inspected; end that `with` block first")
    inspection = Inspection(len(layers), knockout, ablate, patch)
    for i, m in enumerate(layers):
        m.inspector = (inspection, i)
    try:
        yield inspection
    finally:
        for m in layers:
            m.inspector = None
