"""Named hook points: where to read or change what the model computes inside.

Every place worth looking at in the forward pass is a HookPoint with TransformerLens's name and
shape, so code written against its cache reads ours. The names are the points' paths in the
module tree (model.hook_point.name_points), in the order they fire:

    hook_embed, hook_pos_embed                      (B, T, C)  token and position embeddings
    blocks.{l}.hook_resid_pre                       (B, T, C)  the stream entering block l
    blocks.{l}.ln1.hook_scale                       (B, T, 1)  ln1's divisor, √(var + eps)
    blocks.{l}.ln1.hook_normalized                  (B, T, C)  the stream normalised, before
                                                    ln1's gain and bias (as TransformerLens)
    blocks.{l}.attn.hook_q, hook_k, hook_v          (B, T, H, D) after qk-norm and rotation
    blocks.{l}.attn.hook_attn_scores                (B, H, T, S) q·kᵀ/√D, -inf where masked
    blocks.{l}.attn.hook_pattern                    (B, H, T, S) softmax of the scores
    blocks.{l}.attn.hook_z                          (B, T, H, D) each head's weights·v
    blocks.{l}.attn.hook_result                     (B, T, H, C) each head's write to the stream
    blocks.{l}.hook_attn_out                        (B, T, C)  attention's sum, biases included
    blocks.{l}.hook_resid_mid                       (B, T, C)  the stream between attn and MLP
    blocks.{l}.hook_mlp_in                          (B, T, C)  the MLP's own copy of it (a
                                                    change here reaches the MLP only)
    blocks.{l}.ln2.hook_scale, ln2.hook_normalized             the same for ln2
    blocks.{l}.mlp.hook_pre, hook_post              (B, T, 4C) the MLP before / after its
                                                    activation
    blocks.{l}.hook_mlp_out                         (B, T, C)  the MLP's write to the stream
    blocks.{l}.hook_resid_post                      (B, T, C)  the stream leaving block l
    ln_final.hook_scale, ln_final.hook_normalized   the same for the final LayerNorm

(Letters: B batch, T query positions, S key positions, C channels, H heads, D head size.) A
HookedGPT (model.hooked), and a GPT given to model.split_inputs, also has TransformerLens's
split inputs, blocks.{l}.hook_q_input, hook_k_input, hook_v_input (B, T, H, C), right after
hook_resid_pre.

A hook is a function fn(value, hook), as in TransformerLens: `hook` is the HookPoint and
hook.name its name. It may return a replacement of the same shape (None keeps the value; any
other shape is a ValueError naming the point and both shapes); autograd's graph runs through
it, so a hook can also keep a tensor to take its gradient. The ways in:

    with hooks(model, {"blocks.0.attn.hook_pattern": fn, is_z: other_fn}):
        logits = model(idx)
    logits, cache = run_with_cache(model, idx, names=["blocks.0.attn.hook_pattern"])
    with caching(model, names) as cache:  # around any pass, e.g. model.residual(idx)
        ...

TransformerLens's spelling of these on a HookedGPT (model.hooked: model.hooks(...),
model.run_with_hooks(...), model.run_with_cache(...), model.add_hook(...), with backward hooks
too); and, the points and LayerNorms being modules, PyTorch's own hooks on them
(point.register_forward_hook), which is also how nnsight reads and patches them.

What costs something runs only when asked for: with no point watched the model runs exactly
as it did before the points existed (PyTorch's fused attention kernel and LayerNorm, the same
logits bit for bit). A hook on hook_attn_scores or hook_pattern makes that layer take the
explicit path built from the equations; hook_result computes every head's write apart; a hook
on a LayerNorm's point computes that LayerNorm from its equation; a split input gives its layer
the copies of model.split_inputs.
"""

import inspect
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

import torch

from checks import did_you_mean
from model.cache import ActivationCache
from model.hook_point import HookPoint, name_points
from model.split_inputs import SPLIT_INPUTS


def per_layer(point: str, n_layer: int) -> list[str]:
    """The names of one point in every block: per_layer("attn.hook_pattern", 2) is
    ["blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"]."""
    return [f"blocks.{l}.{point}" for l in range(n_layer)]


def hook_points(model: torch.nn.Module) -> dict[str, HookPoint]:
    """Every HookPoint of `model` and its submodules, by name, in the order they fire (the
    order the modules register them). Points not yet named are named from `model`'s tree."""
    points = [m for m in model.modules() if isinstance(m, HookPoint)]
    if any(point.name is None for point in points):
        name_points(model)
    return {point.name: point for point in points}


# TransformerLens 4's bridge calls the split inputs blocks.{l}.attn.hook_q_input (and so does its
# direct path patching); HookedTransformer, and we, blocks.{l}.hook_q_input. Both are accepted.
_SPLIT_ALIAS = re.compile(r"^(blocks\.\d+)\.attn\.(hook_[qkv]_input)$")
NameOrPredicate = str | Callable[[str], bool]


def select(
    model: torch.nn.Module,
    names: NameOrPredicate | Iterable[str] | None,
    points: dict[str, HookPoint] | None = None,
) -> list[str]:
    """The point names that `names` means: None is every point but the split inputs (which
    change how their layer computes, so they are hooked only by name or predicate); a predicate
    keeps the names it is true of; a name or a list of names must each be a point (a ValueError
    names the closest; blocks.{l}.attn.hook_q_input is blocks.{l}.hook_q_input, as in
    TransformerLens 4, and so for k and v). `points` is hook_points(model), where the caller
    has it already."""
    points = hook_points(model) if points is None else points
    if names is None:
        return [n for n in points if not n.endswith(SPLIT_INPUTS)]
    if callable(names):
        return [n for n in points if names(n)]
    names = [names] if isinstance(names, str) else list(names)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"a hook point is named by a str, got {type(name).__name__} {name!r}")
    names = [_SPLIT_ALIAS.sub(r"\1.\2", name) for name in names]
    for name in names:
        if name not in points:
            hint = did_you_mean(name, points, n=3) or "see model.hooks for the names"
            raise ValueError(f"{type(model).__name__} has no hook point {name!r}; {hint}")
    return names


Hooks = dict[NameOrPredicate, Callable] | Iterable[tuple[NameOrPredicate, Callable]]


@contextmanager
def hooks(model: torch.nn.Module, fns: Hooks, keep: bool = False) -> Iterator[torch.nn.Module]:
    """Install hooks for the `with` block: {name or predicate: fn(value, hook)}, or a list of
    (name or predicate, fn) pairs (TransformerLens's fwd_hooks, where one name may come twice).
    A predicate installs its fn on every point whose name it is true of. Hooks stack: a point
    runs them in the order installed, and each block removes exactly what it added, on any
    exception too; keep=True leaves them installed after a block that ends without one (for
    model.hooked's add_hook, until its reset_hooks)."""
    points = hook_points(model)
    added = []
    done = False
    try:
        for key, fn in fns.items() if isinstance(fns, dict) else fns:
            check_hook(key, fn)
            for name in select(model, key, points):
                points[name].fns.append(fn)
                added.append((points[name], fn))
        yield model
        done = True
    finally:
        if not (keep and done):
            for point, fn in reversed(added):
                if fn in point.fns:  # reset_hooks inside the block may have taken it already
                    point.fns.remove(fn)


def check_hook(key: NameOrPredicate, fn: Callable) -> None:
    """A one-line TypeError unless fn can be called as fn(activation, hook), TransformerLens's
    signature: checked when the hook is installed, not deep inside a forward pass."""
    if not callable(fn):
        raise TypeError(f"the hook for {key!r} is a {type(fn).__name__}, not a function")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # no signature to read (some builtins): called as it is
        return
    try:
        signature.bind(None, None)
    except TypeError:
        name = getattr(fn, "__name__", type(fn).__name__)
        raise TypeError(
            f"the hook for {key!r}, {name}{signature}, cannot be called as fn(activation, "
            "hook): give it exactly those two positional arguments (others need defaults)"
        ) from None


def run_with_cache(
    model: torch.nn.Module,
    idx: torch.Tensor,
    names: NameOrPredicate | Iterable[str] | None = None,
    detach: bool = True,
    names_filter: NameOrPredicate | Iterable[str] | None = None,
    **forward_kwargs: object,
) -> tuple[torch.Tensor, ActivationCache]:
    """(logits, cache): the model's logits on idx and an ActivationCache {name: tensor}
    (model.cache) of the points asked for (None: all of them but the split inputs, which on a
    large model and a long input is a great deal of memory). A point that fires several times in
    one pass keeps its last value. detach=False keeps autograd's graph in the cached tensors.
    `names_filter` is TransformerLens's name for `names`: give one of the two."""
    if names_filter is not None:
        if names is not None:
            raise ValueError("names and names_filter say the same thing; give one of them")
        names = names_filter
    with caching(model, names, detach) as cache:
        logits = model(idx, **forward_kwargs)
    return logits, cache


@contextmanager
def caching(
    model: torch.nn.Module,
    names: NameOrPredicate | Iterable[str] | None = None,
    detach: bool = True,
) -> Iterator[ActivationCache]:
    """run_with_cache's cache around any pass the `with` block runs, not only the whole forward:
    `with caching(model, names) as cache: model.residual(idx)` keeps the points without
    unembedding every position (what a reader of attention alone needs)."""
    config = getattr(model, "config", None)
    cache = ActivationCache(n_layers=getattr(config, "n_layer", None))
    chosen = set(select(model, names))

    def keep(value, hook):
        cache[hook.name] = value.detach() if detach else value

    with hooks(model, {lambda name: name in chosen: keep}):
        yield cache
