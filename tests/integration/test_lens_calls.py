"""TransformerLens's calls that its own hook tests and demos use, on HookedGPT: a point's
add_hook / has_hooks / remove_hooks, model.hook_dict, remove_all_hook_fns, ln*.hook_scale,
prepend_bos wherever run_with_cache takes it, model.device; and a weight view it lacks fails in
one line naming runs.bridge.to_transformer_lens."""

import pytest
import torch

from model.hook_point import HookPoint
from model.hooks import hook_points
from tests.helpers import make_run, one_line

IDX = torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(3))


def test_a_points_own_hooks_live_as_transformerlens_says(tiny_hooked_gpt):
    model = tiny_hooked_gpt().eval()
    point = model.hook_dict["blocks.0.attn.hook_pattern"]
    seen = []
    point.add_hook(lambda x, hook: seen.append(hook.name))
    point.add_hook(lambda x, hook: seen.append("first"), prepend=True)
    point.add_hook(lambda x, hook: seen.append("kept"), is_permanent=True)
    assert point.has_hooks() and point.has_hooks("fwd") and not point.has_hooks("bwd")
    model(IDX)
    assert seen == ["first", "blocks.0.attn.hook_pattern", "kept"]
    point.remove_hooks()  # the permanent one stays
    assert point.has_hooks() and not point.has_hooks(including_permanent=False)
    model.remove_all_hook_fns(including_permanent=True)
    assert not any(p.has_hooks() for p in model.hook_dict.values())
    with pytest.raises(ValueError, match="level"):
        point.add_hook(lambda x, hook: None, level=1)


def test_hook_dict_is_every_point_and_a_plain_gpt_keeps_plain_points(tiny_gpt, tiny_hooked_gpt):
    model = tiny_hooked_gpt()
    assert list(model.hook_dict) == list(hook_points(model))
    assert {"blocks.1.ln2.hook_scale", "ln_final.hook_scale"} <= set(model.hook_dict)
    assert {type(p) for p in hook_points(tiny_gpt()).values()} == {HookPoint}
    assert model.device == torch.device("cpu") == model.cfg.device


@torch.no_grad()
def test_hook_scale_is_the_divisor_and_changing_it_changes_the_logits(tiny_hooked_gpt):
    model = tiny_hooked_gpt().eval()
    _, cache = model.run_with_cache(IDX, names_filter=lambda n: n.startswith("ln_final"))
    stream = model.blocks_from(model.drop(model.tok_emb(IDX) + model.pos_emb.weight[:12]), 0)
    torch.testing.assert_close(cache["scale"], (stream.var(-1, False, keepdim=True) + 1e-5).sqrt())
    doubled = model.run_with_hooks(IDX, fwd_hooks=[("ln_final.hook_scale", lambda s, hook: 2 * s)])
    ln = model.ln_f
    want = model.lm_head(cache["normalized"] / 2 * ln.weight + ln.bias)
    torch.testing.assert_close(doubled, want, atol=1e-5, rtol=0)


def test_prepend_bos_is_taken_by_forward_as_by_run_with_cache(tmp_path):
    from runs.loading import load_run

    make_run(tmp_path / "run", "bpe", 64)
    model = load_run(tmp_path / "run").model
    text = "the cat sat"
    logits, _ = model.run_with_cache(text, prepend_bos=False)
    torch.testing.assert_close(model(text, prepend_bos=False), logits)
    # This tokenizer has no BOS: both calls refuse prepend_bos=True alike, in the same words.
    with pytest.raises(ValueError) as forward_error:
        model(text, prepend_bos=True)
    with pytest.raises(ValueError) as cache_error:
        model.run_with_cache(text, prepend_bos=True)
    assert str(forward_error.value) == str(cache_error.value) and "BOS" in str(cache_error.value)


@pytest.mark.parametrize(
    "view, owner",
    [
        (lambda m: m.unembed.W_U, "model.unembed"),
        (lambda m: m.embed.W_E, "model"),
        (lambda m: m.blocks[0].attn.W_Q, "blocks[0].attn"),
        (lambda m: m.blocks[1].mlp.W_in, "blocks[1].mlp"),
        (lambda m: m.blocks[0].ln1, "blocks[0]"),
    ],
)
def test_a_weight_view_it_lacks_fails_in_one_line_naming_the_call(tiny_hooked_gpt, view, owner):
    model = tiny_hooked_gpt()
    with pytest.raises(AttributeError) as e:
        view(model)
    one_line(e, f"{owner} has no", "runs.bridge.to_transformer_lens")
    assert model.unembed(torch.zeros(1, 32)).shape[-1] == 50  # the method itself still runs
