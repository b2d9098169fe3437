"""What a hook point checks of what its hooks return: a tensor of the point's shape, or (from our
hooks, model/hook_point.py) None to keep the value. PyTorch's own forward hooks and pre-hooks on
a point are checked too, after all of them: the shape recorded before the first pre-hook, the
result compared with it after the last hook. The check is put on a point only when a PyTorch
hook is, so an unhooked forward pays nothing."""

import torch
import torch.nn as nn


def checked(point: nn.Module, handle):
    """`handle` (of a hook just put on `point`), with the check moved to either end of the
    point's hooks: first before its pre-hooks, last after its hooks."""
    for old in getattr(point, "_check_handles", ()):
        old.remove()
    point._check_handles = (
        nn.Module.register_forward_pre_hook(point, _record_input, prepend=True),
        nn.Module.register_forward_hook(point, _check_output),
    )
    return handle


def others(hooks: dict) -> bool:
    """Whether `hooks` (a module's hook dict) holds a hook other than the check."""
    return bool(hooks) and any(not getattr(fn, "point_check", False) for fn in hooks.values())


def _record_input(point: nn.Module, args: tuple) -> None:
    point.expected = args[0].shape if args and isinstance(args[0], torch.Tensor) else None


def _check_output(point: nn.Module, args: tuple, out: object) -> None:
    expected = getattr(point, "expected", None)
    if not isinstance(out, torch.Tensor) or (expected is not None and out.shape != expected):
        raise ValueError(bad_replacement(point.name, expected, out))


_record_input.point_check = _check_output.point_check = True


def bad_replacement(name: str, x: "torch.Tensor | torch.Size | None", out: object) -> str:
    """The error of a hook on the point `name` that returned `out` where the point is `x`."""
    got = f"shape {tuple(out.shape)}" if isinstance(out, torch.Tensor) else type(out).__name__
    shape = tuple(x.shape) if isinstance(x, torch.Tensor) else tuple(x or ())
    return (
        f"a hook on {name} returned {got} where the point is {shape}: return a tensor "
        "of the same shape, or None to keep the value"
    )
