"""The worked examples of the two articles, and the attention module's invariants."""

import torch

from model.attention import CausalSelfAttention, attention
from tests.helpers import explicit_path, patterns


def test_softmax_of_first_article_scores():
    # "it" against animal / jungle / hunt with scaled scores 3, 1, 0.
    scores = torch.tensor([3.0, 1.0, 0.0], dtype=torch.float64)
    weights = torch.softmax(scores, dim=0)
    torch.testing.assert_close(
        weights, torch.tensor([0.8438, 0.1142, 0.0420], dtype=torch.float64), atol=5e-5, rtol=0
    )
    # The article's rounded values.
    assert [round(w, 3) for w in weights.tolist()] == [0.844, 0.114, 0.042]


def test_first_article_output_from_values():
    # A query/key pair chosen so that q·k · scale reproduces the scores 3, 1, 0 exactly.
    q = torch.tensor([[1.0]], dtype=torch.float64)
    k = torch.tensor([[3.0], [1.0], [0.0]], dtype=torch.float64)
    v = torch.tensor([[2.0, 4.0], [6.0, 2.0], [1.0, 8.0]], dtype=torch.float64)
    out, weights = attention(q, k, v, scale=1.0)
    torch.testing.assert_close(
        weights[0], torch.tensor([0.8438, 0.1142, 0.0420], dtype=torch.float64), atol=5e-5, rtol=0
    )
    torch.testing.assert_close(
        out[0], torch.tensor([2.41477, 3.93965], dtype=torch.float64), atol=5e-6, rtol=0
    )


# "Your journey starts with one step", one 3-d vector per word.
JOURNEY = torch.tensor(
    [
        [0.43, 0.15, 0.89],  # Your
        [0.55, 0.87, 0.66],  # journey
        [0.57, 0.85, 0.64],  # starts
        [0.22, 0.58, 0.33],  # with
        [0.77, 0.25, 0.10],  # one
        [0.05, 0.80, 0.55],  # step
    ],
    dtype=torch.float64,
)


def test_second_article_journey_example():
    x = JOURNEY
    # Identity W_Q, W_K, W_V and no scaling: scores are plain dot products with "journey".
    scores = x[1:2] @ x.T
    torch.testing.assert_close(
        scores[0],
        torch.tensor([0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865], dtype=torch.float64),
        atol=5e-5,
        rtol=0,
    )
    z2, weights = attention(x[1:2], x, x, scale=1.0)
    torch.testing.assert_close(
        weights[0],
        torch.tensor([0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581], dtype=torch.float64),
        atol=5e-5,
        rtol=0,
    )
    # The article prints z2 as a column of 0.4371s: a typo. The weighted sum of the value
    # vectors with the weights above is [0.4419, 0.6515, 0.5683].
    torch.testing.assert_close(
        z2[0], torch.tensor([0.4419, 0.6515, 0.5683], dtype=torch.float64), atol=5e-5, rtol=0
    )


def test_default_scale_is_one_over_sqrt_dk():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 5, 16), torch.randn(2, 3, 7, 16), torch.randn(2, 3, 7, 4)
    out, weights = attention(q, k, v)
    expected = torch.softmax(q @ k.transpose(-2, -1) / 4.0, dim=-1)  # √16 = 4
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(out, expected @ v)
    assert out.shape == (2, 3, 5, 4) and weights.shape == (2, 3, 5, 7)


def test_masked_positions_get_exactly_zero_weight():
    torch.manual_seed(0)
    q, k, v = torch.randn(4, 8), torch.randn(6, 8), torch.randn(6, 8)
    mask = torch.tensor([True, False, True, False, False, True]).expand(4, 6)
    out, weights = attention(q, k, v, mask=mask)
    assert torch.all(weights[:, ~mask[0]] == 0.0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(4))
    # Same as attending over the kept keys only.
    keep = mask[0]
    out_kept, _ = attention(q, k[keep], v[keep])
    torch.testing.assert_close(out, out_kept)


def test_module_weights_are_causal_and_rows_sum_to_one():
    torch.manual_seed(0)
    attn = CausalSelfAttention(n_embd=32, n_head=4).eval()
    x = torch.randn(2, 10, 32)
    (weights,) = patterns(attn, x)
    assert weights.shape == (2, 4, 10, 10)
    above = torch.triu(torch.ones(10, 10, dtype=torch.bool), diagonal=1)
    assert torch.all(weights[..., above] == 0.0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 10))


def test_module_explicit_and_fused_paths_agree():
    torch.manual_seed(0)
    attn = CausalSelfAttention(n_embd=32, n_head=4).eval()
    x = torch.randn(3, 12, 32)
    fused = attn(x)
    with explicit_path(attn):
        explicit = attn(x)
    assert not attn.hook_pattern.fns  # the block's end uninstalls it
    assert (fused - explicit).abs().max().item() <= 1e-5
