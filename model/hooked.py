"""TransformerLens's calling conventions over our GPT, so that code written for its models runs
on ours unchanged. HookedGPT is a GPT (the same weights, the same forward) with these calls on
top; runs.loading.load_run gives one, and the plain GPT of model.gpt knows nothing of them:

    model = load_run("out/default").model      a HookedGPT, its run's tokenizer attached

    model.cfg                                  its config names: n_layers, n_heads, d_model, ...
    model.to_tokens(text), to_str_tokens(text) with the tokenizer attached (set_tokenizer)
    logits, cache = model.run_with_cache(tokens, names_filter=...)   cache["pattern", 0]
    logits = model.run_with_hooks(tokens, fwd_hooks=[(name or predicate, fn)])
    with model.hooks(fwd_hooks=[...]): ...

They are model.hooks's two ways in, spelled as TransformerLens spells them; a hook is
fn(value, hook) in both. Tokens are (B, T) ids; (T,) ids are a batch of one, and text is
tokenized by the attached tokenizer (model.text, which also says what prepend_bos means here).

Hooks live as long as in TransformerLens (its HookedRootModule and TransformerBridge): a call
with reset_hooks_end=True takes off the hooks it added and no others; model.add_hook's stay
until model.reset_hooks(), and a permanent one until reset_hooks(including_permanent=True).

This layer is kept for what it has and grows no further: TransformerLens itself opens the run
(runs.bridge.to_transformer_lens: its export, TransformerBridge; docs/reference/python.md), with
its weight views, weight processing and every cache method. Asked for a weight view it lacks
(model/lens_views.py), the model names that call.
"""

import inspect
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from model.cache import ActivationCache
from model.gpt import GPT, lm_loss
from model.hook_point import HookPoint
from model.hooks import NameOrPredicate, check_hook, hook_points, hooks, run_with_cache, select
from model.keywords import keywords_checked, unknown_keyword
from model.lens_views import (
    DIRECTIONS,
    LENS_MODULES,
    LENS_ONLY,
    LensHook,
    RoutedCall,
    bridge_route,
    route_views,
)
from model.text import TextMixin

FwdHooks = Sequence[tuple[NameOrPredicate, Callable]]
RETURN_TYPES = ("logits", "loss", "both", None)


@dataclass(frozen=True)
class LensConfig:
    """model.cfg: the model's sizes in TransformerLens's names (read-only; our own names are
    model.config). n_key_value_heads None: every head has its own keys and values."""

    n_layers: int
    n_heads: int
    d_model: int
    d_head: int
    d_mlp: int
    d_vocab: int
    d_vocab_out: int
    n_ctx: int
    device: torch.device
    dtype: torch.dtype
    act_fn: str
    positional_embedding_type: str
    normalization_type: str = "LN"
    n_key_value_heads: int | None = None
    attn_only: bool = False
    default_prepend_bos: bool = False
    tokenizer_prepends_bos: bool = False
    model_name: str = "tinygpt"
    attn_types: list[str] | None = None  # ["local", "global", ...] where layer 0 is local
    window_size: int | None = None  # the local layer's window


class HookedMixin(TextMixin):
    """The methods of the module docstring, for a module with `config` (model.gpt.GPTConfig);
    those that take text come from TextMixin (model.text)."""

    @property
    def cfg(self) -> LensConfig:
        c, p = self.config, self.tok_emb.weight
        act = {"none": "gelu", "tanh": "gelu_new"}[c.gelu_approximate]
        return LensConfig(
            n_layers=c.n_layer,
            n_heads=c.n_head,
            d_model=c.n_embd,
            d_head=c.n_embd // c.n_head,
            d_mlp=4 * c.n_embd,
            d_vocab=c.vocab_size,
            d_vocab_out=c.vocab_size,
            n_ctx=c.block_size,
            device=p.device,
            dtype=p.dtype,
            act_fn=act if c.mlp_activation == "gelu" else c.mlp_activation,
            positional_embedding_type="rotary" if c.rotary else "standard",
            attn_types=["local"] + ["global"] * (c.n_layer - 1) if c.local_window else None,
            window_size=c.local_window or None,
        )

    def returned(self, logits: torch.Tensor, idx: torch.Tensor, return_type: str | None):
        """forward's return_type: "logits", "loss" (mean next-token loss on idx), "both"
        (logits, loss) or None."""
        if return_type not in RETURN_TYPES:
            raise ValueError(f"return_type must be one of {RETURN_TYPES}, got {return_type!r}")
        if return_type == "logits" or return_type is None:
            return logits if return_type else None
        if idx.size(1) < 2:
            raise ValueError("a loss needs at least two tokens: one to read and one to predict")
        loss = lm_loss(logits[:, :-1], idx[:, 1:])
        return (logits, loss) if return_type == "both" else loss

    @keywords_checked
    @contextmanager
    def hooks(
        self,
        fwd_hooks: FwdHooks = (),
        bwd_hooks: FwdHooks = (),
        reset_hooks_end: bool = True,
        clear_contexts: bool = False,
    ) -> Iterator["HookedMixin"]:
        """TransformerLens's `with model.hooks(fwd_hooks=[(name or predicate, fn)])`: the hooks
        are on for the block and off after it, on any exception too. bwd_hooks' fn(grad, hook)
        sees the gradient of the point's value (and may return a replacement), in the next
        backward through the values of this block. reset_hooks_end=False keeps them installed
        until model.reset_hooks(); either way, hooks installed before the block stay on, as
        in TransformerLens. clear_contexts is accepted and does nothing: our points keep no
        context."""
        for key, fn in bwd_hooks:
            check_hook(key, fn)
        pairs = list(fwd_hooks) + [(key, LensHook(fn, "bwd")) for key, fn in bwd_hooks]
        with hooks(self, pairs, keep=not reset_hooks_end):
            yield self

    def set_use_attn_result(self, use: bool) -> None:
        """Accepted and not needed: hook_result is computed whenever it is hooked."""

    set_use_split_qkv_input = set_use_hook_mlp_in = set_use_attn_in = set_use_attn_result

    @keywords_checked
    def add_hook(
        self, name: NameOrPredicate, hook: Callable, dir: str = "fwd", is_permanent: bool = False
    ) -> None:
        """TransformerLens's model.add_hook: `hook` stays installed through run_with_hooks and
        run_with_cache until model.reset_hooks(), or, is_permanent, until
        reset_hooks(including_permanent=True). dir "bwd": a backward hook, as bwd_hooks are."""
        if dir not in DIRECTIONS[:2]:
            raise ValueError(f"dir must be 'fwd' or 'bwd', got {dir!r}")
        check_hook(name, hook)
        with hooks(self, [(name, LensHook(hook, dir, is_permanent))], keep=True):
            pass

    def add_perma_hook(self, name: NameOrPredicate, hook: Callable, dir: str = "fwd") -> None:
        """add_hook(name, hook, dir, is_permanent=True), as TransformerLens spells it."""
        self.add_hook(name, hook, dir=dir, is_permanent=True)

    @keywords_checked
    def reset_hooks(
        self,
        clear_contexts: bool = True,
        direction: str = "both",
        including_permanent: bool = False,
        level: int | None = None,
    ) -> None:
        """Take the hooks of `direction` ("fwd", "bwd" or "both") off every point, the
        permanent ones too only with including_permanent. clear_contexts is accepted and does
        nothing (our points keep no context); a `level` is refused: our hooks keep none."""
        self.remove_all_hook_fns(direction, including_permanent, level)

    def remove_all_hook_fns(
        self, direction: str = "both", including_permanent: bool = False, level: int | None = None
    ) -> None:
        """TransformerLens's remove_all_hook_fns: each point's remove_hooks (model.hook_point)."""
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
        for point in hook_points(self).values():
            point.remove_hooks(direction, including_permanent, level)

    @property
    def hook_dict(self) -> dict[str, HookPoint]:
        """{name: HookPoint} of every point, as TransformerLens's model.hook_dict."""
        return hook_points(self)

    @property
    def device(self) -> torch.device:
        """Where the weights are (TransformerLens's and transformers' model.device)."""
        return self.tok_emb.weight.device

    def __getattr__(self, name: str):
        """nn.Module's lookup (parameters, buffers, submodules); for TransformerLens's weight
        views and the methods that read them (LENS_ONLY), an AttributeError whose one line
        names the route that has them."""
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name in LENS_ONLY or name in LENS_MODULES:
                raise AttributeError(bridge_route("model", name)) from None
            raise

    @property
    def unembed(self) -> RoutedCall:
        """GPT.unembed (the final LayerNorm and the LM head), whose TransformerLens attributes
        (model.unembed.W_U) name the route that has them."""
        return RoutedCall(super().unembed, "model.unembed")

    def run_with_hooks(
        self,
        *model_args,
        fwd_hooks: FwdHooks = (),
        bwd_hooks: FwdHooks = (),
        reset_hooks_end: bool = True,
        clear_contexts: bool = False,
        **model_kwargs,
    ):
        """The model's output on the input with the hooks on (model.hooks's fwd_hooks)."""
        idx, kwargs = self._forward_args("run_with_hooks", model_args, model_kwargs)
        with self.hooks(fwd_hooks, bwd_hooks, reset_hooks_end, clear_contexts):
            return self(idx, **kwargs)

    def run_with_cache(
        self,
        *model_args,
        names_filter: NameOrPredicate | list[str] | None = None,
        return_cache_object: bool = True,
        device: str | torch.device | None = None,
        remove_batch_dim: bool = False,
        incl_bwd: bool = False,
        **model_kwargs,
    ) -> tuple[torch.Tensor, ActivationCache | dict]:
        """(output, cache) of the points names_filter asks for (None: every point but the split
        q/k/v inputs, which change how a layer computes), detached, on `device` if given; a
        plain dict with return_cache_object=False. incl_bwd=True calls backward on the output
        (a scalar: return_type="loss") and caches each point's gradient as NAME_grad."""
        idx, kwargs = self._forward_args("run_with_cache", model_args, model_kwargs)
        grads = {}
        keep = LensHook(lambda grad, hook: grads.__setitem__(f"{hook.name}_grad", grad), "bwd")
        chosen = set(select(self, names_filter)) if incl_bwd else set()
        with hooks(self, [(lambda name: name in chosen, keep)]):
            out, cache = run_with_cache(self, idx, names_filter, **kwargs)
        if incl_bwd:
            if not (isinstance(out, torch.Tensor) and out.dim() == 0 and out.requires_grad):
                raise ValueError(
                    "incl_bwd=True needs a scalar output with gradients: pass "
                    'return_type="loss", outside torch.no_grad()'
                )
            out.backward()
            cache.update({name: grad.detach() for name, grad in grads.items()})
        if device is not None:
            cache.to(device)
        if remove_batch_dim:
            cache = cache.remove_batch_dim()
        return out, cache if return_cache_object else dict(cache)

    def _forward_args(self, method, args, kwargs):
        """(ids, forward's keyword arguments) of a run_with_* call; unknown keywords are a
        TypeError naming the nearest ones."""
        if len(args) != 1:
            raise TypeError(f"{method}() takes the tokens as its one positional argument")
        method_keys = inspect.signature(getattr(type(self), method)).parameters
        known = [k for k in inspect.signature(self.forward).parameters if k != "input"]
        for key in kwargs:
            if key not in known and key != "prepend_bos":
                takes = [*known, "prepend_bos", *method_keys]
                takes = [k for k in takes if k != "self" and not k.startswith("model_")]
                raise TypeError(unknown_keyword(method, key, takes))
        idx = self.input_tokens(args[0], kwargs.pop("prepend_bos", None))
        return idx, kwargs


class HookedGPT(HookedMixin, GPT):
    """A GPT that also takes text, TransformerLens's return_type and its calls (the module
    docstring). Its state dict is a GPT's: either loads the other's weights."""

    def __init__(self, config):
        super().__init__(config)
        route_views(self)  # the blocks' missing weight views name the route

    def forward(self, input, targets=None, caches=None, return_type="logits", prepend_bos=None):
        """GPT's forward on `input`: (B, T) ids, (T,) ids as a batch of one, or text (model.text;
        prepend_bos as in to_tokens); return_type "logits", "loss" (the mean next-token loss of
        the input itself), "both" (logits, loss) or None. With targets, GPT's (logits, loss)."""
        idx = self.input_tokens(input, prepend_bos)
        if targets is not None:
            return super().forward(idx, targets, caches)
        logits = super().forward(idx, caches=caches)
        return logits if return_type == "logits" else self.returned(logits, idx, return_type)
