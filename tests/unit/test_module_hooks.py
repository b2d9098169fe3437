"""Every module of the model runs its own forward, watched or not: PyTorch's hooks and nnsight on
the LayerNorms (ln_1, ln_2, ln_f) fire whether or not a hook point is watched, a backward hook in
TransformerLens's convention (returning (grad,)) replaces the gradient, and the hook points'
names are their paths in the module tree."""

import pytest
import torch

from model.hook_point import LENS_NAMES, HookPoint
from model.hooks import hook_points, hooks, run_with_cache

IDX = torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(7))
WATCHED = {
    "nothing": None,
    "ln1.hook_normalized": "blocks.0.ln1.hook_normalized",
    "ln2.hook_scale": "blocks.1.ln2.hook_scale",
    "ln_final.hook_normalized": "ln_final.hook_normalized",
}
LAYER_NORMS = ["blocks.0.ln_1", "blocks.0.ln_2", "blocks.1.ln_1", "blocks.1.ln_2", "ln_f"]


def keep_none(x, hook):
    return None


@pytest.mark.parametrize("watched", WATCHED.values(), ids=WATCHED.keys())
@torch.no_grad()
def test_forward_hooks_on_every_layer_norm_fire_whether_or_not_a_point_is_watched(
    tiny_gpt, watched
):
    model = tiny_gpt().eval()
    seen = {}

    def record(name):
        return lambda module, args, out: seen.setdefault(name, []).append(out)

    handles = [model.get_submodule(n).register_forward_hook(record(n)) for n in LAYER_NORMS]
    try:
        with hooks(model, {watched: keep_none} if watched else {}):
            logits = model(IDX)
    finally:
        for handle in handles:
            handle.remove()
    assert sorted(seen) == sorted(LAYER_NORMS) and all(len(v) == 1 for v in seen.values())
    # ln_f's output is what the LM head reads: the logits follow from it.
    head = model.lm_head(seen["ln_f"][0])[..., : model.config.vocab_size]
    torch.testing.assert_close(head, logits, atol=1e-6, rtol=0)


@torch.no_grad()
def test_a_forward_hook_on_ln_2_replaces_its_output_with_a_point_watched(tiny_gpt):
    model = tiny_gpt().eval()
    clean = model(IDX)
    ln_2 = model.blocks[1].ln_2
    handle = ln_2.register_forward_hook(lambda module, args, out: torch.zeros_like(out))
    try:
        with hooks(model, {"blocks.1.ln2.hook_normalized": keep_none}):
            zeroed = model(IDX)
    finally:
        handle.remove()
    assert (zeroed - clean).abs().max() > 1e-3  # the MLP read zeros: the logits moved
    with hooks(model, {"blocks.1.ln2.hook_normalized": keep_none}):
        torch.testing.assert_close(model(IDX), clean, atol=1e-6, rtol=0)  # the hook came off


def test_nnsight_reads_ln_2_output_with_and_without_a_watched_point(tiny_gpt):
    nnsight = pytest.importorskip("nnsight", reason="pip install -r requirements-test.txt")
    model = tiny_gpt().eval()
    seen = []
    handle = model.blocks[0].ln_2.register_forward_hook(lambda m, a, out: seen.append(out))
    try:
        with torch.no_grad():
            model(IDX)
    finally:
        handle.remove()
    wrapped = nnsight.NNsight(model)
    for watched in ({}, {"blocks.0.ln2.hook_normalized": keep_none}):
        with torch.no_grad(), hooks(model, watched), wrapped.trace(IDX):
            out = wrapped.blocks[0].ln_2.output.save()
        torch.testing.assert_close(out, seen[0], atol=1e-6, rtol=0)


def test_a_backward_hook_returning_a_one_tuple_replaces_the_gradient(tiny_hooked_gpt):
    model = tiny_hooked_gpt()
    name = "blocks.0.hook_resid_mid"
    model.add_hook(name, lambda grad, hook: (torch.zeros_like(grad),), dir="bwd")
    model(IDX, return_type="loss").backward()
    # Everything below block 0's resid_mid reaches the loss only through it: no gradient there.
    assert model.blocks[0].attn.w_qkv.weight.grad.abs().sum() == 0
    assert model.blocks[0].ln_1.weight.grad.abs().sum() == 0
    assert model.pos_emb.weight.grad.abs().sum() == 0
    assert model.blocks[1].attn.w_qkv.weight.grad.abs().sum() > 0
    model.reset_hooks()
    model.zero_grad()
    model(IDX, return_type="loss").backward()
    assert model.blocks[0].attn.w_qkv.weight.grad.abs().sum() > 0  # the hook came off


def test_the_points_are_named_by_their_paths_in_the_module_tree(tiny_gpt):
    model = tiny_gpt()
    for path, module in model.named_modules():
        if isinstance(module, HookPoint):
            lens = ".".join(LENS_NAMES.get(part, part) for part in path.split("."))
            assert module.name == lens and model.get_submodule(path) is module
    names = list(hook_points(model))
    assert "blocks.0.ln1.hook_normalized" in names and "ln_final.hook_scale" in names
    # The order they fire in is the order the modules hold them.
    fired = []
    with torch.no_grad(), hooks(model, {lambda n: True: lambda x, hook: fired.append(hook.name)}):
        run_with_cache(model, IDX)
    assert [n for n in names if n in fired] == list(dict.fromkeys(fired))
