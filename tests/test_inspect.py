"""inspect_attention, the one way to look inside attention: records, knockout, ablation, and the
fused path untouched outside it."""

import math

import pytest
import torch
import torch.nn.functional as F

from model.attention import inspect_attention


IDX = torch.randint(0, 50, (2, 12), generator=torch.Generator().manual_seed(1))


@torch.no_grad()
def test_recorded_weights_are_the_equations_of_layer_0(tiny_gpt):
    model = tiny_gpt().eval()
    with inspect_attention(model) as seen:
        logits = model(IDX)
    assert logits.shape == (2, 12, 50)  # model(idx) still returns logits only
    # Layer 0 by hand: x = token + position embedding, q and k from LN(x), softmax(q·kᵀ/√D).
    block = model.blocks[0]
    x = model.tok_emb(IDX) + model.pos_emb(torch.arange(12))
    q, k, _ = block.attn.w_qkv(block.ln_1(x)).split(32, dim=2)
    q, k = (t.view(2, 12, 4, 8).transpose(1, 2) for t in (q, k))  # (B, T, C) -> (B, H, T, D)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(8)
    scores = scores.masked_fill(~torch.tril(torch.ones(12, 12, dtype=torch.bool)), float("-inf"))
    torch.testing.assert_close(seen.weights[0], torch.softmax(scores, -1), atol=1e-6, rtol=0)
    assert [w.shape for w in seen.weights] == [(2, 4, 12, 12)] * 2
    assert [o.shape for o in seen.outputs] == [(2, 4, 12, 8)] * 2


def test_without_an_inspection_the_fused_kernel_runs_and_agrees_with_the_explicit_path(tiny_gpt, monkeypatch):
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
        with inspect_attention(model):
            explicit = model(IDX)
        assert len(calls) == 2  # the explicit path never calls the fused kernel
        after = model(IDX)
    assert len(calls) == 4 and all(b.attn.inspector is None for b in model.blocks)
    assert torch.equal(before, after)
    assert (before - explicit).abs().max().item() <= 1e-5


@torch.no_grad()
def test_an_empty_knockout_changes_nothing_and_a_knockout_renormalises_the_row(tiny_gpt):
    model = tiny_gpt().eval()
    with inspect_attention(model) as clean:
        logits = model(IDX)
    nothing = {l: torch.zeros(2, 4, 12, 12, dtype=torch.bool) for l in range(2)}
    with inspect_attention(model, knockout=nothing) as same:
        assert torch.equal(model(IDX), logits)
    assert all(torch.equal(a, b) for a, b in zip(same.weights, clean.weights))
    # Query 9 of head 2 in layer 1, batch row 0, may not see keys 3 and 4.
    blocked = torch.zeros(2, 4, 12, 12, dtype=torch.bool)
    blocked[0, 2, 9, [3, 4]] = True
    with inspect_attention(model, knockout={1: blocked}) as seen:
        changed = model(IDX)
    w, w0 = seen.weights[1][0, 2, 9], clean.weights[1][0, 2, 9]
    assert w[3].item() == 0.0 and w[4].item() == 0.0
    kept = [s for s in range(10) if s not in (3, 4)]
    torch.testing.assert_close(w[kept], w0[kept] / w0[kept].sum(), atol=1e-6, rtol=0)
    # Layer 1 is the last: only that position's logits can move, and they do.
    assert torch.equal(changed[1], logits[1]) and torch.equal(changed[0, :9], logits[0, :9])
    assert (changed[0, 9] - logits[0, 9]).abs().max().item() > 1e-6
    assert torch.equal(seen.weights[0], clean.weights[0])  # layer 0 is untouched


@torch.no_grad()
def test_ablation_replaces_chosen_heads_outputs_before_w_o(tiny_gpt):
    model = tiny_gpt().eval()
    with inspect_attention(model) as clean:
        logits = model(IDX)
    own = clean.outputs[0]
    where = torch.zeros(2, 4, 12, dtype=torch.bool)
    where[:, 1, 5] = True
    with inspect_attention(model, ablate={0: (where, own)}):  # its own output: no change
        assert torch.equal(model(IDX), logits)
    with inspect_attention(model, ablate={0: (where, torch.zeros(8))}) as seen:
        changed = model(IDX)
    assert seen.outputs[0][:, 1, 5].abs().max().item() == 0.0
    assert torch.equal(seen.outputs[0][:, [0, 2, 3]], own[:, [0, 2, 3]])
    assert torch.equal(changed[:, :5], logits[:, :5])  # causal: earlier positions are untouched
    assert (changed[:, 5] - logits[:, 5]).abs().max().item() > 1e-6


def test_edits_keep_the_graph_so_gradients_flow(tiny_gpt):
    model = tiny_gpt().eval()
    blocked = torch.zeros(1, 1, 12, 12, dtype=torch.bool)
    blocked[..., 11, 0] = True
    with inspect_attention(model, knockout={0: blocked}) as seen:
        model(IDX).sum().backward()
    assert seen.weights[0].requires_grad
    assert model.blocks[0].attn.w_qkv.weight.grad.abs().sum().item() > 0


def test_mistakes_are_value_errors_and_the_block_always_uninstalls(tiny_gpt):
    model = tiny_gpt().eval()
    every = torch.ones(1, 1, 12, 12, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"knockout.*layer 0.*no key"):
        with inspect_attention(model, knockout={0: every}):
            model(IDX)
    assert all(b.attn.inspector is None for b in model.blocks)
    with pytest.raises(ValueError, match=r"knockout.*\[2\].*0\.\.1"):  # the layer asked for, the layers there are
        with inspect_attention(model, knockout={2: every}):
            pass
    with pytest.raises(ValueError, match="already being inspected"):
        with inspect_attention(model), inspect_attention(model):
            pass
    with pytest.raises(ValueError, match="no CausalSelfAttention"):
        with inspect_attention(torch.nn.Linear(2, 2)):
            pass


@torch.no_grad()
def test_inspection_with_a_kv_cache_matches_the_whole_sequence(tiny_gpt):
    model = tiny_gpt().eval()
    caches = model.new_caches(2)
    model(IDX[:, :11], caches=caches)
    blocked = torch.zeros(2, 4, 12, 12, dtype=torch.bool)
    blocked[:, :, 11, 2:5] = True
    with inspect_attention(model, knockout={0: blocked[:, :, 11:]}) as step:
        last = model(IDX[:, 11:], caches=caches)
    with inspect_attention(model, knockout={0: blocked}) as whole:
        full = model(IDX)
    assert step.weights[0].shape == (2, 4, 1, 12)
    torch.testing.assert_close(step.weights[0][:, :, 0], whole.weights[0][:, :, 11], atol=1e-6, rtol=0)
    torch.testing.assert_close(last[:, 0], full[:, 11], atol=1e-5, rtol=0)
