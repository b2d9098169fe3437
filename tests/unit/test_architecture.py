"""The GPTConfig options from the speedrun records: relu², QK-norm, rotary positions, an untied
head; and a local first layer. Each is checked for what it computes, and every combination keeps
the model's promises: causal, both attention paths agree, the KV cache matches a full forward,
checkpoints round-trip."""

import math

import pytest
import torch
import torch.nn.functional as F

from model.attention import CausalSelfAttention, causal_mask, rotary_angles, rotate
from model.checkpoint import build_gpt
from model.gpt import MLP, GPTConfig, lm_loss, relu2
from model.hooks import run_with_cache
from model.sampling import generate
from tests.helpers import explicit_path, patterns

OPTIONS = [
    dict(mlp_activation="relu2"),
    dict(qk_norm=True),
    dict(rotary=True),
    dict(tie_embeddings=False),
    dict(local_window=3),
    dict(mlp_activation="relu2", qk_norm=True, rotary=True, tie_embeddings=False, local_window=3),
]


def test_relu2_is_relu_squared_and_the_mlp_uses_it():
    x = torch.tensor([-2.0, -0.5, 0.0, 0.5, 3.0])
    assert relu2(x).tolist() == [0.0, 0.0, 0.0, 0.25, 9.0]
    torch.manual_seed(0)
    mlp = MLP(GPTConfig(n_embd=8, n_head=2, mlp_activation="relu2"))
    h = torch.randn(3, 8)
    expected = mlp.w_out(torch.clamp(mlp.w_in(h), min=0) ** 2)
    torch.testing.assert_close(mlp(h), expected)
    mlp.activation = "gelu"  # the same weights through GELU give something else
    assert (mlp(h) - expected).abs().max() > 1e-4


def test_rotation_keeps_lengths_and_scores_depend_only_on_the_distance():
    D = 8
    cos, sin = rotary_angles(40, D)
    assert cos.shape == sin.shape == (40, D // 2)
    # Pair 0 turns by one radian per position, the last pair by 10000^(-6/8) radians.
    torch.testing.assert_close(cos[5, 0], torch.tensor(math.cos(5.0)))
    torch.testing.assert_close(sin[7, 3], torch.tensor(math.sin(7 * 10000 ** (-6 / 8))))
    q, k = torch.randn(D), torch.randn(D)

    def at(x, p):  # x rotated as if it stood at position p
        return rotate(x.view(1, D), cos[p : p + 1], sin[p : p + 1]).view(D)

    torch.testing.assert_close(at(q, 13).norm(), q.norm())
    torch.testing.assert_close(at(q, 0), q)  # position 0 is no rotation
    score = at(q, 9) @ at(k, 4)
    for shift in (1, 10, 25):  # the same distance, 5, anywhere gives the same score
        torch.testing.assert_close(at(q, 9 + shift) @ at(k, 4 + shift), score, atol=1e-5, rtol=0)
    assert (at(q, 9) @ at(k, 2) - score).abs() > 1e-3  # another distance, another score


def test_qk_norm_makes_attention_blind_to_the_scale_of_queries_and_keys():
    torch.manual_seed(0)
    x = torch.randn(2, 6, 16)
    for qk_norm in (True, False):
        attn = CausalSelfAttention(16, 4, qk_norm=qk_norm)
        before = attn(x)
        with torch.no_grad():
            attn.w_qkv.weight[:32] *= 10.0  # q and k ten times larger; v unchanged
            attn.w_qkv.bias[:32] *= 10.0
        changed = (attn(x) - before).abs().max().item()
        assert (changed < 1e-5) if qk_norm else (changed > 1e-3), (qk_norm, changed)
        seen = patterns(attn, x)
        scores_bound = math.sqrt(4)  # |q̂·k̂| / √D <= √D with D = 16 / 4
        if qk_norm:  # weights from scores within ±√D: no key gets more than e^(2√D) times another
            w = seen[0][..., -1, :]  # last query sees all 6 keys
            assert (w.max(-1).values / w.min(-1).values).max() <= math.exp(2 * scores_bound) + 1e-3


def test_a_rotary_model_has_no_position_table_and_an_untied_head_its_own_matrix(tiny_gpt):
    model = tiny_gpt(rotary=True, tie_embeddings=False)
    names = dict(model.named_parameters())
    assert "pos_emb.weight" not in names and model.pos_emb is None
    assert model.lm_head.weight is not model.tok_emb.weight
    C, V, L = 32, 50, 2
    per_block = (
        (C * 3 * C + 3 * C) + (C * C + C) + (C * 4 * C + 4 * C) + (4 * C * C + C) + 2 * (2 * C)
    )
    # Matmul parameters: the head (V x C), the blocks, the final LayerNorm; the token table is
    # only looked up and is left out, as the position table is for a learned-position model.
    assert model.num_params() == V * C + L * per_block + 2 * C
    assert model.num_params(non_embedding=False) == 2 * V * C + L * per_block + 2 * C


def test_a_rotary_model_reads_order_through_attention(tiny_gpt):
    """Without a position table, only the rotation tells a one-layer model where tokens stand:
    shuffling the tokens before the last one changes its logits, and with the rotation taken out
    it could not (the last position sees the same set of keys and values). With more layers the
    causal mask itself leaks order: earlier positions see fewer tokens."""
    idx = torch.tensor([[3, 14, 15, 9, 26, 5, 35, 8]])
    shuffled = idx[:, [4, 0, 6, 2, 1, 5, 3, 7]]  # the same tokens, another order, same last token
    model = tiny_gpt(rotary=True, n_layer=1).eval()
    assert (model(shuffled)[0, -1] - model(idx)[0, -1]).abs().max() > 1e-4
    for block in model.blocks:
        block.attn.rotary = False
    torch.testing.assert_close(model(shuffled)[0, -1], model(idx)[0, -1], atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    "options", OPTIONS, ids=lambda o: "+".join(f"{k}={v}" for k, v in o.items())
)
def test_every_option_keeps_causality_both_paths_and_the_kv_cache(tiny_gpt, options):
    model = tiny_gpt(**options).eval()
    idx = torch.randint(0, 50, (2, 16), generator=torch.Generator().manual_seed(1))
    full = model(idx)
    changed = idx.clone()
    changed[:, 9:] = (changed[:, 9:] + 7) % 50
    torch.testing.assert_close(model(changed)[:, :9], full[:, :9], atol=1e-6, rtol=0)

    model.train()  # gradients through both paths (dropout is 0: same function)
    targets = torch.randint(0, 50, (2, 16))
    lm_loss(model(idx), targets).backward()
    fused = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    explicit, cache = run_with_cache(model, idx, lambda n: n.endswith("hook_pattern"), detach=False)
    seen = list(cache.values())
    lm_loss(explicit, targets).backward()
    torch.testing.assert_close(explicit, model(idx), atol=1e-5, rtol=0)
    for name, grad in fused.items():
        torch.testing.assert_close(
            model.get_parameter(name).grad, grad, atol=1e-5, rtol=0, msg=name
        )
    assert all(torch.allclose(w.sum(-1), torch.ones(2, 4, 16)) for w in seen)

    model.eval()
    caches = model.new_caches(2)
    parts = [model(idx[:, :5], caches=caches), model(idx[:, 5:9], caches=caches)]
    parts += [model(idx[:, t : t + 1], caches=caches) for t in range(9, 16)]
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=0)
    prompt = idx[:, :3]  # past block_size the window slides and is re-encoded: still the same
    cached = torch.stack(list(generate(model, prompt, 30, temperature=0, use_cache=True)), 1)
    plain = torch.stack(list(generate(model, prompt, 30, temperature=0, use_cache=False)), 1)
    assert torch.equal(cached, plain)


@pytest.mark.parametrize("options", OPTIONS[2:], ids=["rotary", "untied", "local", "all"])
def test_a_checkpoint_of_every_option_builds_the_same_model(tiny_gpt, options):
    model = tiny_gpt(**options).eval()
    rebuilt = build_gpt(model.config, {k: v.clone() for k, v in model.state_dict().items()})
    assert (rebuilt.lm_head.weight is rebuilt.tok_emb.weight) == model.config.tie_embeddings
    idx = torch.randint(0, 50, (2, 16))
    torch.testing.assert_close(rebuilt(idx), model(idx), atol=0, rtol=0)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(mlp_activation="swish"), r"mlp_activation.*'swish'"),
        (dict(rotary=True, n_embd=12, n_head=4), r"rotary.*even.*\b3\b"),
        (dict(local_window=-1), r"local_window.*-1"),
    ],
)
def test_bad_options_name_the_field(overrides, message):
    with pytest.raises(ValueError, match=message):
        GPTConfig(**{"vocab_size": 50, "n_embd": 32, "n_head": 4, **overrides})


def test_rms_norm_of_the_heads_is_what_qk_norm_applies():
    """The fused path's q and k, seen through the explicit path's weights: softmax of the
    normalised q·k / √D."""
    torch.manual_seed(0)
    attn = CausalSelfAttention(16, 2, qk_norm=True)
    x = torch.randn(1, 5, 16)
    seen = patterns(attn, x)
    q, k, _ = attn.w_qkv(x).split(16, dim=2)
    q = F.rms_norm(q.view(1, 5, 2, 8).transpose(1, 2), (8,))
    k = F.rms_norm(k.view(1, 5, 2, 8).transpose(1, 2), (8,))
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(8)
    scores = scores.masked_fill(~torch.ones(5, 5, dtype=torch.bool).tril(), float("-inf"))
    torch.testing.assert_close(seen[0], torch.softmax(scores, -1))


def test_qk_norm_hands_the_kernel_one_dtype_when_autocast_norms_in_float32(monkeypatch):
    """CUDA's autocast computes rms_norm in float32 (torch's autocast policy) while v stays
    bfloat16, and the fused kernel refuses mixed dtypes. Here rms_norm is made to do the same."""
    real = F.rms_norm
    monkeypatch.setattr(
        F, "rms_norm", lambda x, shape, *args, **kw: real(x.float(), shape, *args, **kw)
    )
    for rotary_positions in (0, 8):
        attn = CausalSelfAttention(16, 2, qk_norm=True, rotary_positions=rotary_positions).to(
            torch.bfloat16
        )
        x = torch.randn(1, 5, 16, dtype=torch.bfloat16)
        assert attn(x).dtype == torch.bfloat16
        with explicit_path(attn):
            assert attn(x).dtype == torch.bfloat16
        assert patterns(attn, x)[0].dtype == torch.bfloat16


def test_the_local_mask_keeps_the_last_window_positions_of_each_query():
    assert causal_mask(0, 4, 4, window=2).int().tolist() == [
        [1, 0, 0, 0],
        [1, 1, 0, 0],
        [0, 1, 1, 0],
        [0, 0, 1, 1],
    ]
    # Two new positions after a cache of 3: absolute positions 3 and 4 over keys 0 .. 4.
    assert causal_mask(3, 2, 5, window=2).int().tolist() == [[0, 0, 1, 1, 0], [0, 0, 0, 1, 1]]
    assert torch.equal(causal_mask(0, 4, 4, window=0), causal_mask(0, 4, 4))


@pytest.mark.parametrize("window", [1, 3])
def test_a_local_first_layer_never_reads_past_its_window(tiny_gpt, window):
    """One layer, local: the logits at position t follow from tokens t-window+1 .. t alone; a
    global layer's do not."""
    idx = torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(2))
    changed = idx.clone()
    changed[:, :5] = (changed[:, :5] + 11) % 50  # positions 0 .. 4
    for local in (window, 0):
        model = tiny_gpt(n_layer=1, local_window=local).eval()
        unread = 5 + window - 1  # the first position whose window misses 0 .. 4
        moved = (model(changed) - model(idx))[:, unread:].abs().max().item()
        assert (moved == 0) if local else (moved > 1e-4), (local, moved)
    assert model.blocks[0].attn.window == 0


def test_only_layer_zero_is_local(tiny_gpt):
    model = tiny_gpt(n_layer=3, local_window=4)
    assert [b.attn.window for b in model.blocks] == [4, 0, 0]
