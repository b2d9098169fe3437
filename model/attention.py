"""Scaled dot-product attention, written so it reads beside the equations.

    Q = x W_Q,   K = x W_K,   V = x W_V
    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V

Two options (GPTConfig.qk_norm, .rotary) change each head's q and k before the scores: divided
by their root mean square, and rotated by their positions. The equation is the same after that.

Letters used in shape comments: B batch, T query positions, S key positions, C channels
(n_embd), H heads, D head size (d_k = C / H), L layers.

Looking inside: the named hook points of model.hooks (hook_q, hook_k, hook_v, hook_attn_scores,
hook_pattern, hook_z, hook_result). With none of them hooked the module runs PyTorch's fused
kernel; a hook on the scores or the pattern makes it take the explicit path through `attention`
below, which is the equation written out.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from model.hook_point import HookPoint


def attention(q, k, v, mask=None, scale=None, on_scores=None, on_weights=None):
    """Return (out, weights) for queries q (..., T, D), keys k (..., S, D), values v (..., S, Dv).

    scores = q·kᵀ · scale, with scale = 1/√d_k unless given; where the boolean `mask`
    (broadcastable to (..., T, S)) is False the weight is exactly 0; weights = softmax over
    the keys; out = weights·v. Any leading batch/head dimensions are carried through.
    on_scores and on_weights, if given, see (and may replace) the masked scores and the weights.
    """
    d_k = q.size(-1)
    if scale is None:
        scale = 1.0 / math.sqrt(d_k)
    scores = (q @ k.transpose(-2, -1)) * scale  # (..., T, D) @ (..., D, S) -> (..., T, S)
    if mask is not None:
        # -inf becomes an exact 0 after exp(), so masked keys contribute nothing.
        scores = scores.masked_fill(~mask, float("-inf"))
    if on_scores is not None:
        scores = on_scores(scores)
    weights = torch.softmax(scores, dim=-1)  # each row sums to 1 over the keys
    if on_weights is not None:
        weights = on_weights(weights)
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
        """Store k, v of shape (B, H, T, D) after the filled part; return all keys and values so
        far."""
        start, end = self.length, self.length + k.size(2)
        if end > self.k.size(2):
            raise ValueError(
                f"KV cache holds {self.k.size(2)} positions; cannot append up to {end}"
            )
        self.k[:, :, start:end] = k
        self.v[:, :, start:end] = v
        self.length = end
        return self.k[:, :, :end], self.v[:, :, :end]

    def rewind(self, n: int = 1) -> None:
        """Forget the last n positions appended: the next append writes over them."""
        if not 0 <= n <= self.length:
            raise ValueError(f"cannot rewind {n} positions of a KV cache holding {self.length}")
        self.length -= n


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


def causal_mask(start, T, S, device=None, window=0):
    """(T, S) bool: query i, at absolute position start + i, may see keys 0 .. start + i; with
    a `window` > 0, only the last `window` of them (itself included): a local layer.

    Made when a path needs it (the explicit one, a local layer, or several new positions after a
    KV cache), not kept as a (block_size, block_size) buffer per layer: training's fused path
    needs none, and GPT-2's twelve 1024² masks would cost more than loading its weights."""
    mask = torch.ones(T, S, dtype=torch.bool, device=device).tril(diagonal=start)
    return mask.triu(diagonal=start - window + 1) if window else mask


def heads_point(point, x):
    """Pass x (B, H, T, D), as attention holds it, through `point`, which shows (B, T, H, D) as
    TransformerLens does; with nothing hooked, x itself."""
    if not point.active:
        return x
    return point(x.transpose(1, 2)).transpose(1, 2)  # (B, H, T, D) <-> (B, T, H, D)


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where position t only sees positions ≤ t.

    Two paths compute the same function: the explicit one calls `attention` above and is taken
    while the scores or the pattern are hooked; the fused one calls PyTorch's
    scaled_dot_product_attention, which never materialises the (T, T) weights and is the one
    used for training and sampling.
    """

    def __init__(
        self,
        n_embd,
        n_head,
        dropout=0.0,
        bias=True,
        qk_norm=False,
        rotary_positions=0,
        window=0,
    ):
        """qk_norm: RMS-normalise every head's q and k (no gain) before QKᵀ, so no score can grow
        past √d_k. rotary_positions > 0: rotate q and k by their positions 0 .. rotary_positions-1
        (`rotate`); the model then needs no position table. window > 0: each position sees only
        its last `window` positions, itself included (causal_mask)."""
        super().__init__()
        self.n_head = n_head
        self.window = window
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
        for point in ("q", "k", "v", "attn_scores", "pattern", "z", "result"):  # as they fire
            setattr(self, f"hook_{point}", HookPoint())

    @property
    def W_O(self):
        """Each head's rows of the output projection, TransformerLens's W_O (H, D, C): head h
        writes z[:, :, h] @ W_O[h] into the stream (w_out's bias apart)."""
        return self.w_out.weight.T.reshape(self.n_head, self.head_size, -1)

    def project(self, x):
        """x (B, T, C) -> Q = xW_Q, K = xW_K, V = xW_V, each (B, H, T, D)."""
        B, T, C = x.shape
        q, k, v = self.w_qkv(x).split(C, dim=2)  # each (B, T, C)
        # (B, T, C) -> (B, T, H, D) -> (B, H, T, D)
        return [t.view(B, T, self.n_head, self.head_size).transpose(1, 2) for t in (q, k, v)]

    def forward(self, x, cache=None):
        """x (B, T, C) -> (B, T, C).

        With a KVCache, x holds the T newest positions; keys and values of earlier positions
        come from the cache, and this call's keys and values are added to it.
        """
        q, k, v = self.project(x)
        B, H, T, D = q.shape
        start = cache.length if cache is not None else 0
        if self.qk_norm:  # type_as: autocast on CUDA norms in float32; the kernel wants v's dtype
            q = F.rms_norm(q, (self.head_size,)).type_as(v)
            k = F.rms_norm(k, (self.head_size,)).type_as(v)
        if self.rotary:  # positions start .. start+T-1; cached keys were rotated when they came
            cos, sin = self.rotary_cos[start : start + T], self.rotary_sin[start : start + T]
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        q, k, v = (
            heads_point(p, t) for p, t in ((self.hook_q, q), (self.hook_k, k), (self.hook_v, v))
        )
        if cache is not None:
            k, v = cache.append(k, v)  # (B, H, S, D) with S = start + T
        S = k.size(2)

        dropout_p = self.dropout if self.training else 0.0
        if self.hook_attn_scores.active or self.hook_pattern.active:
            mask = causal_mask(start, T, S, q.device, self.window)
            out = self.explicit(q, k, v, mask, dropout_p)
        elif self.window:  # a local layer: never the plain lower triangle
            mask = causal_mask(start, T, S, q.device, self.window)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        elif start == 0:
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
        elif T == 1:  # one new position sees every cached key: nothing to mask
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
        else:  # several new positions after a cache: not the square lower triangle
            mask = causal_mask(start, T, S, q.device)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        z = self.hook_z(out.transpose(1, 2))  # (B, H, T, D) -> (B, T, H, D)
        if self.hook_result.active:
            return self.resid_dropout(self.per_head_result(z))
        return self.resid_dropout(self.w_out(z.contiguous().view(B, T, H * D)))  # concat heads

    def explicit(self, q, k, v, mask, dropout_p):
        """The heads' outputs (B, H, T, D) through `attention`, the scores and the pattern passed
        through their hook points. Blocking keys there (-inf scores) renormalises each row over
        the keys left; a row left with no key at all is a ValueError."""

        def on_scores(scores):
            scores = self.hook_attn_scores(scores)
            if (scores == float("-inf")).all(-1).any():  # NaN is the loss's to report
                raise ValueError(
                    f"{self.hook_attn_scores.name}: a query has no key left to attend "
                    "to; keep at least one key per query (its own position)"
                )
            return scores

        out, weights = attention(
            q, k, v, mask=mask, on_scores=on_scores, on_weights=self.hook_pattern
        )
        if dropout_p > 0.0:  # dropout on the weights, where the fused path applies it
            out = F.dropout(weights, dropout_p) @ v
        return out

    def per_head_result(self, z):
        """Each head's write to the stream, z (B, T, H, D) -> result (B, T, H, C), passed
        through hook_result, then summed over the heads with W_O's bias: what W_O of the
        concatenated heads computes, one head at a time."""
        B, T, H, D = z.shape
        w_o = self.w_out.weight.view(-1, H, D)  # (C, H·D) -> (C, H, D)
        result = self.hook_result(torch.einsum("bthd,chd->bthc", z, w_o))  # (B, T, H, C)
        out = result.sum(2)  # (B, T, C)
        return out + self.w_out.bias if self.w_out.bias is not None else out
