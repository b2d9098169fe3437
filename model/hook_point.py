"""A named place in the forward pass that a hook can read or change (model.hooks installs them).

A HookPoint is an identity layer, as TransformerLens's is: `point(x)` is x unless a hook is on
it. Being a module, it shows in `model.named_modules()`, and PyTorch's own forward hooks reach
it like any layer, as does a library that installs its own forward on each module (nnsight
does). Its `name` is TransformerLens's name for the place, such as blocks.0.attn.hook_pattern
(the list with shapes: model.hooks).
"""

from collections.abc import Callable

import torch
import torch.nn as nn

from model.hook_check import bad_replacement, checked, others


class HookPoint(nn.Module):
    """Identity, unless hooks are installed: then x passes through each fn(x, hook) in turn,
    and a fn that returns a tensor replaces x (None keeps it)."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name
        self.fns: list[Callable] = []

    @property
    def hooked(self) -> bool:
        """Whether a hook is on this point: one of ours or a PyTorch hook (not the check)."""
        return bool(self.fns) or others(self._forward_hooks) or others(self._forward_pre_hooks)

    def register_forward_hook(self, hook, *args, **kwargs):
        """PyTorch's; what the hooks return is then checked (model/hook_check.py)."""
        return checked(self, super().register_forward_hook(hook, *args, **kwargs))

    def register_forward_pre_hook(self, hook, *args, **kwargs):
        """PyTorch's, checked as register_forward_hook's are."""
        return checked(self, super().register_forward_pre_hook(hook, *args, **kwargs))

    @property
    def active(self) -> bool:
        """Whether anything watches this point: a hook (`hooked`), or a forward installed on
        this instance in place of the class's, as nnsight wraps every module of a model it is
        given. The model computes what only a watched point needs (the explicit attention
        path, a head's own write) only then."""
        return self.hooked or "forward" in self.__dict__

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for fn in self.fns:
            if x.requires_grad and x._base is not None:
                # A view (q, k, v are slices of one matmul) that autograd forbids editing in
                # place, as TransformerLens's hooks do (value[:, :, h] = 0): a copy, the same
                # values and the same graph.
                x = x.clone()
            out = fn(x, self)
            if out is not None:
                if not isinstance(out, torch.Tensor) or out.shape != x.shape:
                    raise ValueError(bad_replacement(self.name, x, out))
                x = out
        return x

    def layer(self) -> int:
        """The block the point is in (blocks.{layer}.*), as TransformerLens's hook.layer()."""
        if not self.name.startswith("blocks."):
            raise ValueError(f"{self.name} is in no block: it has no layer")
        return int(self.name.split(".")[1])

    def extra_repr(self) -> str:
        return f"{self.name!r}, {len(self.fns)} hooks"
