"""TransformerLens's names that HookedGPT (model.hooked) does not have, answered with the one
call that does: its weight views (W_U, W_Q, ...), the methods that read them, and its
submodules by name (embed, ln1, ...) raise an AttributeError whose one line names
runs.bridge.to_transformer_lens, TransformerLens's own model of the run. On the model itself
(HookedGPT.__getattr__), on model.unembed (a method: RoutedCall) and on each block, its
attention and its MLP (route_views gives them a subclass that answers so)."""

from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

from model.gpt import MLP
from model.hook_point import HookPoint
from model.split_inputs import SplitAttention, SplitBlock, split_inputs

DIRECTIONS = ("fwd", "bwd", "both")

# TransformerLens's weight views and the methods that read them, which this layer does not have
# and TransformerBridge does: asking for one answers with that route (HookedMixin.__getattr__).
LENS_ONLY = frozenset(
    "W_U b_U W_E W_pos W_E_pos W_Q W_K W_V W_O b_Q b_K b_V b_O QK OV W_in W_out W_gate b_in b_out "
    "tokens_to_residual_directions accumulated_bias all_head_labels".split()
)


# TransformerLens's submodules by name, which this layer does not have as modules.
LENS_MODULES = frozenset({"embed", "pos_embed", "ln_final", "ln1", "ln2"})


def bridge_route(owner: str, name: str) -> str:
    """The one line that answers a call for TransformerLens's `name`, which `owner` lacks."""
    return (
        f"{owner} has no {name}; TransformerLens's own model of the run has it: "
        "runs.bridge.to_transformer_lens(RUN_FOLDER) (the run exported with --export-hf and "
        "opened with TransformerBridge, offline; docs/reference/python.md)"
    )


class RoutedCall:
    """A method that also answers TransformerLens's attributes on it (model.unembed.W_U) with
    the route that has them."""

    def __init__(self, fn: Callable, name: str):
        self.fn, self.name = fn, name

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __getattr__(self, attr: str):
        raise AttributeError(bridge_route(self.name, attr))


class RoutedViews:
    """For a block, its attention or its MLP (HookedGPT makes theirs so): a weight view of
    TransformerLens's that the module lacks (blocks[0].attn.W_Q) names the route."""

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name in LENS_ONLY or name in LENS_MODULES:
                where = self.__dict__.get("lens_name", type(self).__name__)
                raise AttributeError(bridge_route(where, name)) from None
            raise


class RoutedAttention(RoutedViews, SplitAttention):
    """SplitAttention whose missing views name the route (RoutedViews)."""


class RoutedMLP(RoutedViews, MLP):
    """MLP whose missing views name the route (RoutedViews)."""


class RoutedBlock(RoutedViews, SplitBlock):
    """SplitBlock whose missing views (ln1, ...) name the route (RoutedViews)."""


ROUTED = {SplitAttention: RoutedAttention, MLP: RoutedMLP, SplitBlock: RoutedBlock}


def route_views(model: nn.Module) -> None:
    """Each block of `model` given the split q/k/v inputs (model.split_inputs); each hook point
    TransformerLens's calls (LensHookPoint); each block, its attention and its MLP made to name
    the route for a view they lack (RoutedViews), and given its TransformerLens spelling
    (blocks[0].attn)."""
    split_inputs(model)
    for point in model.modules():
        if type(point) is HookPoint:
            point.__class__ = LensHookPoint
    for i, block in enumerate(model.blocks):
        for module, name in ((block, ""), (block.attn, ".attn"), (block.mlp, ".mlp")):
            if type(module) in ROUTED:
                module.__class__ = ROUTED[type(module)]
                module.lens_name = f"blocks[{i}]{name}"


@dataclass(frozen=True, eq=False)
class LensHook:
    """A hook as TransformerLens keeps one: fn(value, hook) in direction `dir`, "fwd" or "bwd"
    (then fn(grad, hook) sees the gradient of the point's value, and may return a replacement,
    in the next backward through it), and whether model.reset_hooks() leaves it on
    (is_permanent). Compared by identity, as the functions it wraps are."""

    fn: Callable
    dir: str = "fwd"
    is_permanent: bool = False

    def __call__(self, value, hook):
        if self.dir == "fwd":
            return self.fn(value, hook)
        if value.requires_grad:
            value.register_hook(lambda grad: self._backward(grad, hook))
        return None

    def _backward(self, grad, hook):
        """fn's replacement of the gradient: a tensor, None, or TransformerLens's (grad,) (a
        module backward hook's tuple of gradients)."""
        out = self.fn(grad, hook)
        return out[0] if isinstance(out, tuple) and len(out) == 1 else out


class LensHookPoint(HookPoint):
    """A HookPoint with TransformerLens's own calls on it (its hook tests use them); HookedGPT's
    points are these (route_views), a plain GPT's stay HookPoints."""

    def add_hook(
        self,
        hook: Callable,
        dir: str = "fwd",
        is_permanent: bool = False,
        level: int | None = None,
        prepend: bool = False,
    ) -> None:
        """TransformerLens's HookPoint.add_hook: hook(value, hook) on this point (dir "bwd":
        on the gradient of its value) until remove_hooks, or the model's reset_hooks, takes it
        off (a permanent one only with including_permanent); `prepend` puts it first. A
        `level` is refused: our hooks keep no context level."""
        if dir not in DIRECTIONS[:2]:
            raise ValueError(f"dir must be 'fwd' or 'bwd', got {dir!r}")
        _no_level("add_hook", level)
        self.fns.insert(0 if prepend else len(self.fns), LensHook(hook, dir, is_permanent))

    def has_hooks(
        self, dir: str = "both", including_permanent: bool = True, level: int | None = None
    ) -> bool:
        """Whether a hook of direction `dir` ("fwd", "bwd", "both") is on this point, the
        permanent ones counted unless including_permanent=False."""
        return any(_matches(fn, dir, including_permanent) for fn in self._hooks_of(dir, level))

    def remove_hooks(
        self, dir: str = "fwd", including_permanent: bool = False, level: int | None = None
    ) -> None:
        """Take this point's hooks of direction `dir` off, the permanent ones only with
        including_permanent (TransformerLens's remove_hooks)."""
        kept = [
            fn for fn in self._hooks_of(dir, level) if not _matches(fn, dir, including_permanent)
        ]
        self.fns[:] = kept

    def layer(self) -> int:
        """The block the point is in (blocks.{layer}.*), as TransformerLens's hook.layer()."""
        if not self.name.startswith("blocks."):
            raise ValueError(f"{self.name} is in no block: it has no layer")
        return int(self.name.split(".")[1])

    def _hooks_of(self, dir, level):
        if dir not in DIRECTIONS:
            raise ValueError(f"dir must be one of {DIRECTIONS}, got {dir!r}")
        _no_level("a hook call", level)
        return self.fns


def _matches(fn, dir: str, including_permanent: bool) -> bool:
    """Whether the installed `fn` is of direction `dir` and, unless including_permanent, not
    permanent. A hook installed otherwise than as a LensHook is a forward one, not permanent."""
    same = dir in ("both", getattr(fn, "dir", "fwd"))
    return same and (including_permanent or not getattr(fn, "is_permanent", False))


def _no_level(call: str, level: int | None) -> None:
    if level is not None:
        raise ValueError(
            f"{call}(level={level!r}): our hooks keep no context level; call it without one"
        )
