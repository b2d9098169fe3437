"""Scaled dot-product attention, written so it reads beside the equations.

    Q = x W_Q,   K = x W_K,   V = x W_V
    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V

Letters used in shape comments: B batch, T query positions, S key positions, C channels
(n_embd), H heads, D head size (d_k = C / H).
"""

import math

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


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where position t only sees positions ≤ t.

    Two paths compute the same function: the explicit one calls `attention` above and can
    return the per-head weights; the fused one calls PyTorch's scaled_dot_product_attention,
    which never materialises the (T, T) weights and is the one used for training.
    """

    def __init__(self, n_embd, n_head, block_size, dropout=0.0, bias=True):
        super().__init__()
        self.n_head = n_head
        self.head_size = n_embd // n_head
        # W_Q, W_K and W_V stacked side by side: one (C, 3C) matmul instead of three (C, C).
        self.w_qkv = nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.w_out = nn.Linear(n_embd, n_embd, bias=bias)
        self.dropout = dropout
        self.resid_dropout = nn.Dropout(dropout)
        causal_mask = torch.tril(torch.ones(block_size, block_size, dtype=torch.bool))
        self.register_buffer("causal_mask", causal_mask, persistent=False)

    def forward(self, x, return_weights=False, cache=None):
        """x (B, T, C) -> (out (B, T, C), weights (B, H, T, S) or None).

        With a KVCache, x holds the T newest positions; keys and values of earlier positions
        come from the cache, and this call's keys and values are added to it.
        """
        B, T, C = x.shape
        q, k, v = self.w_qkv(x).split(C, dim=2)  # Q = xW_Q, K = xW_K, V = xW_V, each (B, T, C)
        q = q.view(B, T, self.n_head, self.head_size).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
        k = k.view(B, T, self.n_head, self.head_size).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
        v = v.view(B, T, self.n_head, self.head_size).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
        start = 0
        if cache is not None:
            start = cache.length
            k, v = cache.append(k, v)  # (B, H, S, D) with S = start + T
        S = k.size(2)
        # Query i sits at absolute position start + i and may see keys 0 .. start + i.
        mask = self.causal_mask[start : start + T, :S]  # (T, S)

        dropout_p = self.dropout if self.training else 0.0
        if return_weights:
            out, weights = attention(q, k, v, mask=mask)  # (B, H, T, D), (B, H, T, S)
            if dropout_p > 0.0:  # dropout on the weights, where the fused path applies it
                out = F.dropout(weights, dropout_p) @ v
        else:
            weights = None
            if start == 0:
                out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
            elif T == 1:  # one new position sees every cached key: nothing to mask
                out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
            else:  # several new positions after a cache: not the square lower triangle
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        out = out.transpose(1, 2).contiguous().view(B, T, C)  # (B, H, T, D) -> (B, T, C): concat heads
        return self.resid_dropout(self.w_out(out)), weights
