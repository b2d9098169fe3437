"""A named place in the forward pass that a hook can read or change (model.hooks installs them).

A HookPoint is an identity layer, as TransformerLens's is: `point(x)` is x unless a hook is on
it. Being a module, it shows in `model.named_modules()`, where PyTorch's own hooks and nnsight
reach it like any layer. Its `name` is its path there, named once as TransformerLens's
HookedRootModule.setup does, in its spelling (blocks.0.attn.hook_pattern; list: model.hooks).
"""

from collections.abc import Callable

import torch
import torch.nn as nn

from model.hook_check import bad_replacement, checked, others


class HookPoint(nn.Module):
    """Identity, unless hooks are installed: then x passes through each fn(x, hook) in turn,
    and a fn that returns a tensor replaces x (None keeps it)."""

    def __init__(self, name: str | None = None):
        super().__init__()
        self.name = name  # None: named by its path (name_points)
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
                # A view (q, k, v are slices of one matmul) that autograd forbids editing in place,
                # as TransformerLens's hooks do (value[:, :, h] = 0): a copy, the same graph.
                x = x.clone()
            out = fn(x, self)
            if out is not None:
                if not isinstance(out, torch.Tensor) or out.shape != x.shape:
                    raise ValueError(bad_replacement(self.name, x, out))
                x = out
        return x

    def extra_repr(self) -> str:
        return f"{self.name!r}, {len(self.fns)} hooks"


# The modules whose path differs from TransformerLens's name: our LayerNorms.
LENS_NAMES = {"ln_1": "ln1", "ln_2": "ln2", "ln_f": "ln_final"}


def name_points(root: nn.Module) -> None:
    """Name every HookPoint under `root` by its path, in TransformerLens's spelling."""
    for path, module in root.named_modules():
        if isinstance(module, HookPoint):
            module.name = ".".join(LENS_NAMES.get(part, part) for part in path.split("."))
