"""The named hook points (model.hooks): TransformerLens's names and shapes, the fused path
untouched where nothing is hooked, edits that change the logits, and the split q/k/v inputs."""

import math

import pytest
import torch
import torch.nn.functional as F

from analysis.interventions import block_keys, replace_where
from model.hooks import caching, hook_points, hooks, per_layer, run_with_cache
from model.split_inputs import split_inputs
from tests.helpers import explicit_path

IDX = torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(1))
B, T, H, D, C = 2, 12, 4, 8, 32

SHAPES = {
    "hook_embed": (B, T, C),
    "hook_pos_embed": (B, T, C),
    "ln_final.hook_scale": (B, T, 1),
    "ln_final.hook_normalized": (B, T, C),
    **{
        f"blocks.{l}.{name}": shape
        for l in range(2)
        for name, shape in {
            "hook_resid_pre": (B, T, C),
            "ln1.hook_scale": (B, T, 1),
            "ln1.hook_normalized": (B, T, C),
            "attn.hook_q": (B, T, H, D),
            "attn.hook_k": (B, T, H, D),
            "attn.hook_v": (B, T, H, D),
            "attn.hook_attn_scores": (B, H, T, T),
            "attn.hook_pattern": (B, H, T, T),
            "attn.hook_z": (B, T, H, D),
            "attn.hook_result": (B, T, H, C),
            "hook_attn_out": (B, T, C),
            "hook_resid_mid": (B, T, C),
            "hook_mlp_in": (B, T, C),
            "ln2.hook_scale": (B, T, 1),
            "ln2.hook_normalized": (B, T, C),
            "mlp.hook_pre": (B, T, 4 * C),
            "mlp.hook_post": (B, T, 4 * C),
            "hook_mlp_out": (B, T, C),
            "hook_resid_post": (B, T, C),
        }.items()
    },
}


@torch.no_grad()
def test_the_cache_has_transformerlens_names_and_shapes_and_the_points_add_up(tiny_gpt):
    model = tiny_gpt().eval()
    logits, cache = run_with_cache(model, IDX)
    assert {name: tuple(v.shape) for name, v in cache.items()} == SHAPES
    # Caching the scores, pattern and per-head results takes the explicit path: the same function.
    torch.testing.assert_close(logits, model(IDX), atol=1e-5, rtol=0)
    for l in range(2):

        def c(name, l=l):
            return cache[f"blocks.{l}.{name}"]

        torch.testing.assert_close(c("hook_resid_mid"), c("hook_resid_pre") + c("hook_attn_out"))
        torch.testing.assert_close(c("hook_resid_post"), c("hook_resid_mid") + c("hook_mlp_out"))
        # Each head's write, summed with W_O's bias, is attention's output.
        bias = model.blocks[l].attn.w_out.bias
        torch.testing.assert_close(
            c("attn.hook_result").sum(2) + bias, c("hook_attn_out"), atol=1e-6, rtol=0
        )
        torch.testing.assert_close(
            c("attn.hook_pattern"), torch.softmax(c("attn.hook_attn_scores"), -1)
        )
        # z = pattern · v, per head.
        z = c("attn.hook_pattern") @ c("attn.hook_v").transpose(1, 2)  # (B, H, T, D)
        torch.testing.assert_close(z.transpose(1, 2), c("attn.hook_z"), atol=1e-6, rtol=0)
    torch.testing.assert_close(
        cache["blocks.0.hook_resid_pre"], cache["hook_embed"] + cache["hook_pos_embed"]
    )
    torch.testing.assert_close(cache["blocks.1.hook_resid_pre"], cache["blocks.0.hook_resid_post"])
    # hook_scale, TransformerLens's: the LayerNorm's divisor, so that stream / scale, centred, is
    # hook_normalized (what apply_ln_to_stack divides a stack by).
    for ln, stream in (
        ("blocks.0.ln1", "blocks.0.hook_resid_pre"),
        ("ln_final", "blocks.1.hook_resid_post"),
    ):
        x = cache[stream]
        centred = x - x.mean(-1, keepdim=True)
        torch.testing.assert_close(
            centred / cache[f"{ln}.hook_scale"], cache[f"{ln}.hook_normalized"]
        )


@torch.no_grad()
def test_the_pattern_is_the_equations_of_layer_0(tiny_gpt):
    model = tiny_gpt().eval()
    _, cache = run_with_cache(model, IDX, ["blocks.0.attn.hook_pattern"])
    assert list(cache) == ["blocks.0.attn.hook_pattern"]  # only what was asked for is kept
    block = model.blocks[0]
    x = model.tok_emb(IDX) + model.pos_emb(torch.arange(12))
    q, k, _ = block.attn.w_qkv(block.ln_1(x)).split(32, dim=2)
    q, k = (t.view(2, 12, 4, 8).transpose(1, 2) for t in (q, k))  # (B, T, C) -> (B, H, T, D)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(8)
    scores = scores.masked_fill(~torch.tril(torch.ones(12, 12, dtype=torch.bool)), float("-inf"))
    torch.testing.assert_close(
        cache["blocks.0.attn.hook_pattern"], torch.softmax(scores, -1), atol=1e-6, rtol=0
    )


def test_without_hooks_the_fused_kernel_runs_and_the_logits_are_the_same_bit_for_bit(
    tiny_gpt, monkeypatch
):
    model = tiny_gpt().eval()
    calls = []
    fused = F.scaled_dot_product_attention

    def counting(*args, **kwargs):
        calls.append(1)
        return fused(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", counting)
    with torch.no_grad():
        before = model(IDX)
        assert len(calls) == 2  # one per layer
        with hooks(
            model,
            {
                "blocks.0.hook_resid_pre": lambda x, hook: None,
                "blocks.1.attn.hook_z": lambda x, hook: None,
            },
        ):
            same = model(IDX)  # points outside the scores and pattern keep the fused kernel
        assert len(calls) == 4
        with explicit_path(model):
            explicit = model(IDX)
        assert len(calls) == 4  # the explicit path never calls the fused kernel
        after = model(IDX)
    assert len(calls) == 6 and all(not p.fns for p in hook_points(model).values())
    assert torch.equal(before, after) and torch.equal(before, same)
    assert 0 < (before - explicit).abs().max().item() <= 1e-5 or torch.equal(before, explicit)


def forward_before_the_points(model, idx):
    """The default GPT's forward pass as it was written before the hook points, op for op."""
    B, T = idx.shape
    x = model.tok_emb(idx) + model.pos_emb(model.positions[:T])
    for block in model.blocks:
        a = block.attn
        q, k, v = a.w_qkv(block.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, a.n_head, a.head_size).transpose(1, 2) for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + a.w_out(out.transpose(1, 2).contiguous().view(B, T, C))
        x = x + block.mlp.w_out(F.gelu(block.mlp.w_in(block.ln_2(x))))
    return model.lm_head(model.ln_f(x))


@torch.no_grad()
def test_with_no_hook_the_logits_are_those_of_the_forward_before_the_points_bit_for_bit(tiny_gpt):
    model = tiny_gpt().eval()
    assert torch.equal(model(IDX), forward_before_the_points(model, IDX))
    with hooks(model, {"blocks.1.hook_resid_mid": lambda x, hook: x + 1e-3}):
        assert not torch.equal(model(IDX), forward_before_the_points(model, IDX))  # it can fail


@torch.no_grad()
def test_a_hook_that_changes_the_pattern_changes_the_logits_and_knockout_renormalises(tiny_gpt):
    model = tiny_gpt().eval()
    logits, clean = run_with_cache(model, IDX, per_layer("attn.hook_pattern", 2))

    # each query sees only itself
    def itself(w, name):
        return torch.eye(12).expand_as(w)

    with hooks(model, {"blocks.0.attn.hook_pattern": itself}):
        changed = model(IDX)
    assert torch.equal(changed[:, 0], logits[:, 0])  # position 0 could only ever see itself
    assert (changed[:, 1:] - logits[:, 1:]).abs().max().item() > 1e-3
    # Query 9 of head 2 in layer 1, batch row 0, may not see keys 3 and 4.
    blocked = torch.zeros(2, 4, 12, 12, dtype=torch.bool)
    blocked[0, 2, 9, [3, 4]] = True
    with hooks(model, {"blocks.1.attn.hook_attn_scores": block_keys(blocked)}):
        changed, seen = run_with_cache(model, IDX, per_layer("attn.hook_pattern", 2))
    w, w0 = (
        seen["blocks.1.attn.hook_pattern"][0, 2, 9],
        clean["blocks.1.attn.hook_pattern"][0, 2, 9],
    )
    assert w[3].item() == 0.0 and w[4].item() == 0.0
    kept = [s for s in range(10) if s not in (3, 4)]
    torch.testing.assert_close(w[kept], w0[kept] / w0[kept].sum(), atol=1e-6, rtol=0)
    # Layer 1 is the last: only that position's logits can move, and they do.
    assert torch.equal(changed[1], logits[1]) and torch.equal(changed[0, :9], logits[0, :9])
    assert (changed[0, 9] - logits[0, 9]).abs().max().item() > 1e-6
    torch.testing.assert_close(
        seen["blocks.0.attn.hook_pattern"], clean["blocks.0.attn.hook_pattern"]
    )


@torch.no_grad()
def test_replacing_heads_z_changes_only_those_heads_and_later_positions(tiny_gpt):
    model = tiny_gpt().eval()
    logits, clean = run_with_cache(model, IDX, ["blocks.0.attn.hook_z"])
    own = clean["blocks.0.attn.hook_z"]
    where = torch.zeros(2, 12, 4, dtype=torch.bool)
    where[:, 5, 1] = True
    with hooks(model, {"blocks.0.attn.hook_z": replace_where(where, own)}):  # its own: no change
        assert torch.equal(model(IDX), logits)
    with hooks(model, {"blocks.0.attn.hook_z": replace_where(where, torch.zeros(8))}):
        changed, seen = run_with_cache(model, IDX, ["blocks.0.attn.hook_z"])
    z = seen["blocks.0.attn.hook_z"]  # a cache installed after the edit sees the edited value
    assert z[:, 5, 1].abs().max().item() == 0.0
    assert torch.equal(z[:, :, [0, 2, 3]], own[:, :, [0, 2, 3]])
    assert torch.equal(changed[:, :5], logits[:, :5])  # causal: earlier positions are untouched
    assert (changed[:, 5] - logits[:, 5]).abs().max().item() > 1e-6


@torch.no_grad()
def test_patching_an_mlp_output_from_another_run_needs_no_change_to_the_model(tiny_gpt):
    model = tiny_gpt().eval()
    other = (IDX + 1) % 50
    target, cache = run_with_cache(
        model, other, ["blocks.1.hook_mlp_out", "blocks.1.hook_resid_mid"]
    )
    base = model(IDX)

    def mlp_out(x, hook):
        return cache["blocks.1.hook_mlp_out"]

    with hooks(model, {"blocks.1.hook_mlp_out": mlp_out}):
        patched = model(IDX)
    assert (patched - base).abs().max().item() > 1e-4  # the patch moves the logits

    # With the stream before the MLP taken from the other run too, the run is the other's.
    def mid(x, hook):
        return cache["blocks.1.hook_resid_mid"]

    with hooks(model, {"blocks.1.hook_resid_mid": mid, "blocks.1.hook_mlp_out": mlp_out}):
        assert torch.equal(model(IDX), target)


def test_hooks_keep_the_graph_so_gradients_flow(tiny_gpt):
    model = tiny_gpt().eval()
    kept = {}

    def keep(x, hook):
        x.retain_grad()
        kept[hook.name] = x

    with hooks(model, {"blocks.0.hook_resid_mid": keep, "blocks.0.attn.hook_pattern": keep}):
        model(IDX).sum().backward()
    assert kept["blocks.0.hook_resid_mid"].grad.shape == (2, 12, 32)
    assert kept["blocks.0.attn.hook_pattern"].grad.abs().sum().item() > 0
    assert model.blocks[0].attn.w_qkv.weight.grad.abs().sum().item() > 0


def test_caching_around_the_blocks_alone_keeps_what_run_with_cache_keeps(tiny_gpt):
    model = tiny_gpt().eval()
    names = per_layer("attn.hook_pattern", 2) + ["blocks.1.hook_resid_post"]
    _, whole = run_with_cache(model, IDX, names)
    with caching(model, names) as cache:
        stream = model.residual(IDX)  # no unembedding
    assert sorted(cache) == sorted(whole) == sorted(names)
    for name in names:
        assert torch.equal(cache[name], whole[name]) and not cache[name].requires_grad
    assert torch.equal(stream, cache["blocks.1.hook_resid_post"])
    assert all(not point.fns for point in hook_points(model).values())  # nothing left installed
    with caching(model, ["blocks.0.hook_resid_mid"], detach=False) as kept:
        model.residual(IDX).sum().backward()  # detach=False: the graph runs through the cache
    assert kept["blocks.0.hook_resid_mid"].requires_grad


@torch.no_grad()
def test_split_inputs_give_each_head_its_own_query_key_and_value_stream(tiny_gpt):
    model = tiny_gpt().eval()
    logits = model(IDX)
    assert "blocks.0.hook_q_input" not in hook_points(model)  # the plain model has none
    split_inputs(model)  # the layer above gives them (HookedGPT has them from the start)

    def nothing(x, hook):
        return None

    with hooks(model, {lambda n: n.endswith(("q_input", "k_input", "v_input")): nothing}):
        split, cache = run_with_cache(model, IDX, ["blocks.0.hook_q_input", "blocks.0.attn.hook_q"])
    assert cache["blocks.0.hook_q_input"].shape == (2, 12, 4, 32)
    torch.testing.assert_close(split, logits, atol=1e-5, rtol=0)  # the same function
    # Changing head 1's query input moves head 1's q only: not its k, not head 0's q.
    _, before = run_with_cache(
        model, IDX, per_layer("attn.hook_q", 1) + per_layer("attn.hook_k", 1)
    )

    def shift_head_1(x, hook):
        x = x.clone()
        x[:, :, 1] += torch.linspace(-1, 1, 32)  # not a constant, which LayerNorm would remove
        return x

    with hooks(model, {"blocks.0.hook_q_input": shift_head_1}):
        _, after = run_with_cache(
            model, IDX, per_layer("attn.hook_q", 1) + per_layer("attn.hook_k", 1)
        )
    q0, q1 = before["blocks.0.attn.hook_q"], after["blocks.0.attn.hook_q"]
    torch.testing.assert_close(q0[:, :, [0, 2, 3]], q1[:, :, [0, 2, 3]], atol=1e-6, rtol=0)
    assert (q0[:, :, 1] - q1[:, :, 1]).abs().max().item() > 1e-3
    torch.testing.assert_close(
        before["blocks.0.attn.hook_k"], after["blocks.0.attn.hook_k"], atol=1e-6, rtol=0
    )


def test_unknown_names_are_value_errors_with_the_closest_and_hooks_always_uninstall(tiny_gpt):
    model = tiny_gpt().eval()
    with pytest.raises(
        ValueError, match=r"hook_patern.*did you mean blocks\.0\.attn\.hook_pattern"
    ):
        with hooks(model, {"blocks.0.attn.hook_patern": lambda x, hook: None}):
            pass
    every = torch.ones(1, 1, 12, 12, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"blocks\.0\.attn\.hook_attn_scores.*no key"):
        with hooks(model, {"blocks.0.attn.hook_attn_scores": block_keys(every)}):
            model(IDX)
    assert all(not p.fns for p in hook_points(model).values())


@torch.no_grad()
def test_hooks_with_a_kv_cache_match_the_whole_sequence(tiny_gpt):
    model = tiny_gpt().eval()
    caches = model.new_caches(2)
    model(IDX[:, :11], caches=caches)
    blocked = torch.zeros(2, 4, 12, 12, dtype=torch.bool)
    blocked[:, :, 11, 2:5] = True
    name = "blocks.0.attn.hook_pattern"
    with hooks(model, {"blocks.0.attn.hook_attn_scores": block_keys(blocked[:, :, 11:])}):
        last, step = run_with_cache(model, IDX[:, 11:], [name], caches=caches)
    with hooks(model, {"blocks.0.attn.hook_attn_scores": block_keys(blocked)}):
        full, whole = run_with_cache(model, IDX, [name])
    assert step[name].shape == (2, 4, 1, 12)
    torch.testing.assert_close(step[name][:, :, 0], whole[name][:, :, 11], atol=1e-6, rtol=0)
    torch.testing.assert_close(last[:, 0], full[:, 11], atol=1e-5, rtol=0)


@torch.no_grad()
def test_a_hook_gets_its_point_and_a_replacement_of_another_shape_is_refused(tiny_gpt):
    model = tiny_gpt().eval()
    seen = []

    def note(x, hook):
        seen.append((hook.name, tuple(x.shape)))

    with hooks(model, {"blocks.1.attn.hook_pattern": note}):
        model(IDX)
    assert seen == [("blocks.1.attn.hook_pattern", (2, 4, 12, 12))]

    # broadcasting it would edit every head
    def one_head(x, hook):
        return x[:, :1]

    with pytest.raises(
        ValueError, match=r"blocks\.0\.attn\.hook_pattern.*\(2, 1, 12, 12\).*\(2, 4, 12, 12\)"
    ):
        with hooks(model, {"blocks.0.attn.hook_pattern": one_head}):
            model(IDX)
    with pytest.raises(ValueError, match=r"blocks\.0\.hook_resid_pre returned float"):
        with hooks(model, {"blocks.0.hook_resid_pre": lambda x, hook: 1.0}):
            model(IDX)
    assert all(not p.fns for p in hook_points(model).values())


@torch.no_grad()
@pytest.mark.parametrize(
    "kind, returned",
    [
        ("forward", lambda x: x[:1, :1]),  # (1, 1, C): would broadcast silently
        ("forward", lambda x: (x,)),  # a tuple: a raw PyTorch error further on
        ("pre", lambda x: (x[:, :1],)),  # a pre-hook's replaced input, of another shape
    ],
)
def test_a_pytorch_hook_on_a_point_is_checked_as_ours_are(tiny_gpt, kind, returned):  # 60: 6
    model = tiny_gpt().eval()
    point = hook_points(model)["blocks.0.hook_resid_mid"]
    if kind == "forward":
        handle = point.register_forward_hook(lambda module, args, out: returned(out))
    else:
        handle = point.register_forward_pre_hook(lambda module, args: returned(args[0]))
    with pytest.raises(ValueError, match=r"blocks\.0\.hook_resid_mid .*\(2, 12, 32\)"):
        model(IDX)
    handle.remove()
    assert not point.hooked  # its check is no hook: the model takes its fast path again
    assert model(IDX).shape == (2, 12, 50)


@pytest.mark.parametrize(
    "fn",
    [
        lambda activation: None,  # too few
        lambda activation, hook, extra: None,  # too many
        lambda activation, *, hook: None,  # keyword-only
    ],
)
def test_a_hook_of_the_wrong_signature_is_refused_when_installed(tiny_gpt, fn):
    model = tiny_gpt().eval()
    with pytest.raises(TypeError, match=r"blocks\.0\.attn\.hook_pattern.*fn\(activation, hook\)"):
        with hooks(model, {"blocks.0.attn.hook_pattern": fn}):
            model(torch.zeros(1, 4, dtype=torch.long))
    assert not any(p.fns for p in hook_points(model).values())  # nothing left installed


def test_a_hook_with_defaults_beyond_two_arguments_is_taken(tiny_gpt):
    model = tiny_gpt().eval()
    seen = []
    with hooks(model, {"hook_embed": lambda activation, hook, tag="x": seen.append(tag)}):
        model(torch.zeros(1, 4, dtype=torch.long))
    assert seen == ["x"]
