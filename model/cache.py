"""The activation cache: what run_with_cache returns, read as TransformerLens's cache is read.

An ActivationCache is a dict {point name: tensor} (model.hooks names the points), so every dict
habit works (`.keys()`, `len()`, iteration, `in` on a full name), and it also takes
TransformerLens's shorthand:

    cache["blocks.0.attn.hook_pattern"]     the full name
    cache["pattern", 0]                     (name, layer): blocks.0.attn.hook_pattern
    cache["resid_post", -1]                 a negative layer counts from the last block
    cache["z", 1, "attn"]                   (name, layer, layer type)
    cache["pattern0"], cache["embed"]       one word: its first digits are the layer

resolved by the rules of TransformerLens's utilities.get_act_name (act_name below): the aliases
attn -> pattern, attn_logits -> attn_scores, key/query/value -> k/q/v, mlp_pre/mlp_post ->
pre/post; q, k, v, z, result, pattern, attn_scores live in attn, pre and post in mlp; a layer
type a, m, b or attention means attn, mlp, the block itself, attn; "normalized" without a layer
is ln_final's.
"""

import re

import torch

from checks import did_you_mean

_ACT_ALIASES = {
    "attn": "pattern",
    "attn_logits": "attn_scores",
    "key": "k",
    "query": "q",
    "value": "v",
    "mlp_pre": "pre",
    "mlp_mid": "mid",
    "mlp_post": "post",
}
_TYPE_ALIASES = {"a": "attn", "m": "mlp", "b": "", "block": "", "blocks": "", "attention": "attn"}
_IN_ATTN = {"k", "v", "q", "z", "rot_k", "rot_q", "result", "pattern", "attn_scores"}
_IN_MLP = {"pre", "post", "mid", "pre_linear"}


def act_name(name: str, layer: int | str | None = None, layer_type: str | None = None) -> str:
    """The full point name that TransformerLens's shorthand means (the module docstring's
    rules): act_name("pattern", 0) is "blocks.0.attn.hook_pattern", act_name("k6") is
    "blocks.6.attn.hook_k", act_name("embed") is "hook_embed". A full name is itself."""
    if ("." in name or name.startswith("hook_")) and layer is None and layer_type is None:
        return name
    match = re.match(r"([a-z]+)(\d+)([a-z]?.*)", name)
    if match is not None:
        name, layer, layer_type = match.groups()
    name = _ACT_ALIASES.get(name, name)
    if name in _IN_ATTN:
        layer_type = "attn"
    elif name in _IN_MLP:
        layer_type = "mlp"
    elif layer_type in _TYPE_ALIASES:
        layer_type = _TYPE_ALIASES[layer_type]
    full = f"blocks.{layer}." if layer is not None else ""
    full += f"{layer_type}." if layer_type else ""
    full += f"hook_{name}"
    if name in ("scale", "normalized") and layer is None:
        full = f"ln_final.{full}"
    return full


class ActivationCache(dict):
    """{point name: tensor} with TransformerLens's lookups (the module docstring). `n_layers`
    (the model's block count) resolves a negative layer; None where the model has no blocks."""

    def __init__(self, values: dict | None = None, n_layers: int | None = None):
        super().__init__(values or {})
        self.n_layers = n_layers

    def resolve(self, key: str | tuple) -> str:
        """The full name a key means: itself if it is one, else act_name of the shorthand."""
        if isinstance(key, str):
            return key if dict.__contains__(self, key) else act_name(key)
        if not isinstance(key, tuple) or not key or not isinstance(key[0], str):
            raise KeyError(
                f"{key!r}: index the cache by a point's name, or by (name, layer[, layer type])"
            )
        name, layer, *rest = key + (None,) * (2 - len(key))
        if isinstance(layer, int) and layer < 0:
            if self.n_layers is None:
                raise KeyError(f"{key!r}: a negative layer needs the model's layer count")
            layer = self.n_layers + layer
        return act_name(name, layer, *rest)

    def __getitem__(self, key):
        name = self.resolve(key)
        if not dict.__contains__(self, name):
            raise KeyError(self._missing(key, name))
        return dict.__getitem__(self, name)

    def __contains__(self, key) -> bool:
        try:
            return dict.__contains__(self, self.resolve(key))
        except KeyError:
            return False

    def get(self, key, default=None):
        return self[key] if key in self else default

    def _missing(self, key, name):
        said = repr(key) if name == key else f"{key!r} ({name})"
        if not self:
            return f"{said}: the cache is empty; ask run_with_cache for it (names_filter)"
        hint = did_you_mean(name, self, n=3) or f"it holds {len(self)} other names"
        return f"{said} is not in the cache ({hint}); ask run_with_cache for it (names_filter)"

    def to(self, device: str | torch.device) -> "ActivationCache":
        """Move every tensor to `device`, in place, and return the cache (as TransformerLens's
        does)."""
        for name, value in self.items():
            dict.__setitem__(self, name, value.to(device))
        return self

    def remove_batch_dim(self) -> "ActivationCache":
        """The cache of a batch of one with that dimension dropped: (1, ...) -> (...)."""
        if any(v.size(0) != 1 for v in self.values()):
            raise ValueError("remove_batch_dim needs a batch of one; index the batch instead")
        return ActivationCache({k: v[0] for k, v in self.items()}, self.n_layers)

    def __repr__(self):
        more = ", ..." if len(self) > 3 else ""
        return f"ActivationCache({len(self)} points: {', '.join(list(self)[:3])}{more})"
