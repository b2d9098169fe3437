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


class HookPoint(nn.Module):
    """Identity, unless hooks are installed: then x passes through each fn(x, hook) in turn,
    and a fn that returns a tensor replaces x (None keeps it)."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name
        self.fns: list[Callable] = []

    @property
    def hooked(self) -> bool:
        """Whether a hook is on this point: one of ours or a PyTorch forward hook (the point's
        own check of what those return does not count)."""
        return bool(self.fns) or _others(self._forward_hooks) or _others(self._forward_pre_hooks)

    def register_forward_hook(self, hook, *args, **kwargs):
        """PyTorch's, and then the point checks what its hooks return (shape and type), after
        all of them: a wrong return is one error naming the point, not a silent broadcast."""
        handle = super().register_forward_hook(hook, *args, **kwargs)
        self._install_check()
        return handle

    def register_forward_pre_hook(self, hook, *args, **kwargs):
        """PyTorch's, checked as register_forward_hook's are."""
        handle = super().register_forward_pre_hook(hook, *args, **kwargs)
        self._install_check()
        return handle

    def _install_check(self) -> None:
        """The shape of x recorded before every pre-hook and checked after every hook: only on
        a point a PyTorch hook was put on, so an unhooked forward pays nothing."""
        for handle in getattr(self, "_check_handles", ()):
            handle.remove()
        self._check_handles = (
            super().register_forward_pre_hook(_record_input, prepend=True),
            super().register_forward_hook(_check_output),
        )

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


def _others(hooks: dict) -> bool:
    """Whether `hooks` (a module's hook dict) holds a hook other than the point's own check."""
    return bool(hooks) and any(not getattr(fn, "point_check", False) for fn in hooks.values())


def _record_input(point: HookPoint, args: tuple) -> None:
    point.expected = args[0].shape if args and isinstance(args[0], torch.Tensor) else None


def _check_output(point: HookPoint, args: tuple, out: object) -> None:
    expected = getattr(point, "expected", None)
    if not isinstance(out, torch.Tensor) or (expected is not None and out.shape != expected):
        raise ValueError(bad_replacement(point.name, expected, out))


_record_input.point_check = _check_output.point_check = True


def bad_replacement(name: str, x: "torch.Tensor | torch.Size | None", out: object) -> str:
    got = f"shape {tuple(out.shape)}" if isinstance(out, torch.Tensor) else type(out).__name__
    shape = tuple(x.shape) if isinstance(x, torch.Tensor) else tuple(x or ())
    return (
        f"a hook on {name} returned {got} where the point is {shape}: return a tensor "
        "of the same shape, or None to keep the value"
    )
