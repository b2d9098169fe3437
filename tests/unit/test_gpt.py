"""The decoder: causality, the two attention paths, learning, config validation."""

import pytest
import torch

from model.gpt import GPT, GPTConfig, lm_loss
from tests.helpers import explicit_path, patterns


def test_logits_shape_for_every_position(tiny_gpt):
    model = tiny_gpt()
    idx = torch.randint(0, 50, (3, 11))
    assert model(idx).shape == (3, 11, 50)
    with explicit_path(model):
        assert model(idx).shape == (3, 11, 50)  # one return contract, hooked or not
    seen = patterns(model, idx)
    assert len(seen) == 2 and all(a.shape == (3, 4, 11, 11) for a in seen)


def test_future_tokens_do_not_change_past_logits(tiny_gpt):
    model = tiny_gpt().eval()
    idx = torch.randint(0, 50, (2, 16))
    changed = idx.clone()
    t = 6
    changed[:, t + 1 :] = (changed[:, t + 1 :] + 7) % 50
    a, b = model(idx), model(changed)
    torch.testing.assert_close(a[:, : t + 1], b[:, : t + 1], atol=1e-6, rtol=0)
    assert (
        a[:, t + 1 :] - b[:, t + 1 :]
    ).abs().max() > 1e-3  # the change did reach later positions


def test_attention_maps_are_causal_distributions(tiny_gpt):
    model = tiny_gpt().eval()
    with torch.no_grad():
        attn = patterns(model, torch.randint(0, 50, (2, 12)))
    above = torch.triu(torch.ones(12, 12, dtype=torch.bool), diagonal=1)
    for weights in attn:
        assert torch.all(weights[..., above] == 0.0)
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 12))


def test_explicit_and_fused_paths_give_same_logits_and_gradients(tiny_gpt):
    model = tiny_gpt()
    idx = torch.randint(0, 50, (4, 16))
    targets = torch.randint(0, 50, (4, 16))

    def run(explicit):
        model.zero_grad()
        if explicit:
            with explicit_path(model):
                logits = model(idx)
        else:
            logits = model(idx)
        lm_loss(logits, targets).backward()
        return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}

    fused_logits, fused_grads = run(False)
    explicit_logits, explicit_grads = run(True)
    assert (fused_logits - explicit_logits).abs().max().item() <= 1e-5
    for name, grad in fused_grads.items():
        assert (grad - explicit_grads[name]).abs().max().item() <= 1e-5, name


def test_tiny_model_overfits_one_batch(tiny_gpt):
    model = tiny_gpt()
    idx = torch.randint(0, 50, (4, 16), generator=torch.Generator().manual_seed(1))
    x, y = idx[:, :-1], idx[:, 1:]
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(300):  # noqa: B007 - the assert after the loop names it
        loss = lm_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if loss.item() < 0.1:
            break
    assert loss.item() < 0.1, f"loss {loss.item():.3f} after {step + 1} steps"


def test_lm_head_is_tied_and_init_scales_residual_projections(tiny_gpt):
    model = tiny_gpt(n_layer=8, n_embd=64)
    assert model.lm_head.weight is model.tok_emb.weight
    std_plain = model.blocks[0].attn.w_qkv.weight.std().item()
    std_resid = model.blocks[0].attn.w_out.weight.std().item()
    assert abs(std_plain - 0.02) < 0.002
    assert abs(std_resid - 0.02 / 4.0) < 0.001  # 1/√(2·8) = 1/4


def test_param_count_and_flops(tiny_gpt):
    model = tiny_gpt()
    C, V, T, L = 32, 50, 16, 2
    per_block = (
        (C * 3 * C + 3 * C) + (C * C + C) + (C * 4 * C + 4 * C) + (4 * C * C + C) + 2 * (2 * C)
    )
    expected = V * C + L * per_block + 2 * C  # token table (tied head), blocks, final LayerNorm
    assert model.num_params() == expected
    assert model.num_params(non_embedding=False) == expected + T * C
    assert model.flops_per_token() == 6 * expected + 12 * L * C * T


def test_kv_cache_matches_full_forward(tiny_gpt):
    model = tiny_gpt().eval()
    idx = torch.randint(0, 50, (2, 12))
    full = model(idx)
    caches = model.new_caches(2)
    parts = [model(idx[:, :5], caches=caches)] + [
        model(idx[:, t : t + 1], caches=caches) for t in range(5, 12)
    ]
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    "overrides, field",
    [
        (dict(n_embd=30, n_head=4), "n_embd"),
        (dict(n_layer=0), "n_layer"),
        (dict(vocab_size=-1), "vocab_size"),
        (dict(block_size=0), "block_size"),
        (dict(n_head=0), "n_head"),
        (dict(dropout=1.0), "dropout"),
        (dict(dropout=-0.1), "dropout"),
    ],
)
def test_bad_config_names_the_field(overrides, field):
    cfg = dict(vocab_size=50, block_size=16, n_layer=2, n_head=4, n_embd=32)
    cfg.update(overrides)
    with pytest.raises(ValueError, match=field):
        GPTConfig(**cfg)


def test_input_longer_than_block_size_is_refused(tiny_gpt):
    model = tiny_gpt()
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, 17, dtype=torch.long))


def test_unembed_reads_through_ln_final_and_crops_the_padded_vocabulary():
    from model.hooks import hooks

    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=10, block_size=8, n_layer=1, n_head=2, n_embd=16)).eval()
    assert model.config.padded_vocab_size == 64  # rows 10..63 are padding
    x = torch.randn(2, 3, 16)
    with torch.no_grad():
        logits = model.unembed(x)
        assert logits.shape == (2, 3, 10)
        assert torch.allclose(logits, model.lm_head(model.ln_f(x))[..., :10], atol=1e-6)
        torch.nn.init.normal_(model.ln_f.bias)
        with hooks(model, {"ln_final.hook_normalized": lambda v, hook: torch.zeros_like(v)}):
            blank = model.unembed(x)  # every position reads ln_f's bias alone
        assert torch.allclose(blank, model.lm_head(model.ln_f.bias)[:10].expand(2, 3, 10))
        assert not torch.allclose(blank, model.unembed(x))
