"""Hooks that change an activation, for model.hooks: the edits every causal test is made of.

Each returns a function fn(value, hook) to install on a hook point; none of them knows which
experiment it serves, and a new experiment needs no change to the model.
"""

from collections.abc import Callable

import torch

from model.hooks import HookPoint

Hook = Callable[[torch.Tensor, HookPoint], torch.Tensor | None]  # model.hooks: fn(value, hook)


def replace_where(where: torch.Tensor, value: torch.Tensor) -> Hook:
    """A hook that puts `value` where the bool `where` is True and keeps the activation
    elsewhere. `where` covers the leading dimensions (for hook_z (B, T, H, D): (B, T, H), or
    anything broadcastable to it); `value` broadcasts to the whole activation."""

    def fn(x, hook):
        mask = where.reshape(where.shape + (1,) * (x.dim() - where.dim()))  # (..., 1, 1)
        return torch.where(mask, value, x)

    return fn


def block_keys(blocked: torch.Tensor) -> Hook:
    """A hook for blocks.{l}.attn.hook_attn_scores: the keys marked in the bool `blocked`
    (broadcastable to (B, H, T, S)) get score -inf, so each row of the pattern renormalises
    over the keys left (a row left with none is a ValueError of the attention module)."""
    return lambda scores, hook: scores.masked_fill(blocked, float("-inf"))
