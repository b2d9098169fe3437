"""Sampling: the KV cache against full recomputation, seeds, top-k / top-p, streaming."""

import math

import pytest
import torch

from model.sampling import ContextWindow, filter_top_k, filter_top_p, generate, sample_next


def kept(logits):
    return torch.isfinite(logits).nonzero().flatten().tolist()


def test_cache_gives_the_same_greedy_tokens_as_recomputing_also_past_block_size(tiny_gpt):
    model = tiny_gpt().eval()
    prompt = torch.randint(0, 40, (2, 5), generator=torch.Generator().manual_seed(1))
    cached = torch.stack(list(generate(model, prompt, 40, temperature=0, use_cache=True)), 1)
    full = torch.stack(list(generate(model, prompt, 40, temperature=0, use_cache=False)), 1)
    assert cached.shape == (2, 40)  # 5 + 40 > 16: the window slid 29 times
    assert torch.equal(cached, full)


def test_cache_gives_the_same_logits_at_every_step_within_and_past_block_size(tiny_gpt):
    model = tiny_gpt().eval()
    prompt = torch.randint(0, 40, (2, 5), generator=torch.Generator().manual_seed(2))
    fast, slow = ContextWindow(model, prompt, True), ContextWindow(model, prompt, False)
    tokens = torch.Generator().manual_seed(3)
    for step in range(40):
        assert (fast.logits - slow.logits).abs().max().item() <= 1e-5, f"step {step}"
        next_ids = torch.randint(0, 40, (2,), generator=tokens)
        fast.push(next_ids)
        slow.push(next_ids)
    assert fast.tokens.shape == (2, 16) and torch.equal(fast.tokens, slow.tokens)


def test_cached_logits_match_one_full_forward_of_the_window(tiny_gpt):
    model = tiny_gpt(block_size=8).eval()
    prompt = torch.arange(3).view(1, 3)
    window = ContextWindow(model, prompt, use_cache=True)
    for t in range(10):
        window.push(torch.tensor([t % 40]))
    expected = model(window.tokens)[:, -1]  # the last 8 tokens at positions 0..7
    assert (window.logits - expected).abs().max().item() <= 1e-5


def test_a_prompt_longer_than_block_size_is_cropped_to_its_last_block_size_tokens(tiny_gpt):
    model = tiny_gpt(block_size=8).eval()
    prompt = torch.randint(0, 40, (1, 20), generator=torch.Generator().manual_seed(4))
    a = torch.cat(list(generate(model, prompt, 5, temperature=0)))
    b = torch.cat(list(generate(model, prompt[:, -8:], 5, temperature=0)))
    assert torch.equal(a, b)


def test_the_same_seed_gives_the_same_tokens_and_another_seed_differs(tiny_gpt):
    model = tiny_gpt().eval()
    prompt = torch.zeros(1, 1, dtype=torch.long)

    def draw(seed):
        g = torch.Generator().manual_seed(seed)
        return torch.cat(list(generate(model, prompt, 30, temperature=1.0, generator=g))).tolist()

    assert draw(7) == draw(7)
    assert draw(7) != draw(8)


def test_top_k_keeps_exactly_the_k_highest_logits():
    logits = torch.tensor([1.0, 5.0, 3.0, 4.0, 2.0])
    assert kept(filter_top_k(logits, 1)) == [1]
    assert kept(filter_top_k(logits, 3)) == [1, 2, 3]
    assert kept(filter_top_k(logits, 5)) == [0, 1, 2, 3, 4]
    assert kept(filter_top_k(logits, 99)) == [0, 1, 2, 3, 4]
    assert len(kept(filter_top_k(torch.tensor([1.0, 2.0, 2.0, 2.0]), 2))) == 2  # a tie: still 2
    out = filter_top_k(logits, 2)
    assert out[1] == 5.0 and out[3] == 4.0  # kept logits are unchanged
    batch = filter_top_k(torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]]), 1)
    assert torch.isfinite(batch).tolist() == [[False, False, True], [True, False, False]]


def test_top_p_keeps_the_smallest_set_whose_mass_reaches_p():
    # Probabilities 1/8, 1/2, 1/8, 1/4 (exact in binary), in scrambled order.
    logits = torch.log(torch.tensor([0.125, 0.5, 0.125, 0.25]))
    assert kept(filter_top_p(logits, 0.01)) == [1]  # the top token is always kept
    assert kept(filter_top_p(logits, 0.5)) == [1]  # 1/2 reaches 0.5 exactly
    assert kept(filter_top_p(logits, 0.6)) == [1, 3]
    assert kept(filter_top_p(logits, 0.75)) == [1, 3]
    assert len(kept(filter_top_p(logits, 0.8))) == 3  # 7/8, with one of the tied 1/8s
    assert kept(filter_top_p(logits, 1.0)) == [0, 1, 2, 3]
    batch = filter_top_p(torch.log(torch.tensor([[0.5, 0.25, 0.25], [0.1, 0.2, 0.7]])), 0.65)
    assert torch.isfinite(batch).tolist() == [[True, True, False], [False, False, True]]


def test_temperature_zero_is_argmax_and_top_k_one_is_too():
    logits = torch.tensor([[0.1, 2.0, -1.0], [3.0, 0.0, 2.9]])
    assert sample_next(logits, temperature=0).tolist() == [1, 0]
    g = torch.Generator().manual_seed(0)
    assert sample_next(logits, temperature=1.5, top_k=1, generator=g).tolist() == [1, 0]


def test_sampling_follows_the_softmax_of_logits_over_temperature():
    logits = torch.log(torch.tensor([[0.2, 0.8]])).expand(4000, 2)
    g = torch.Generator().manual_seed(0)
    share = sample_next(logits, temperature=1.0, generator=g).float().mean().item()
    assert abs(share - 0.8) < 0.03
    hot = sample_next(logits, temperature=0.5, generator=g).float().mean().item()
    assert abs(hot - 0.64 / 0.68) < 0.03  # T=0.5 squares the probabilities: .8² / (.2² + .8²)


def test_tokens_stream_one_at_a_time(tiny_gpt):
    model = tiny_gpt().eval()
    calls = []
    model.register_forward_hook(lambda module, args, output: calls.append(args[0].shape[1]))
    stream = generate(model, torch.zeros(3, 4, dtype=torch.long), 5, temperature=0)
    assert calls == []  # nothing runs before the first token is asked for
    first = next(stream)
    assert first.shape == (3,) and calls == [4]  # the prompt, encoded once
    next(stream)
    assert calls == [4, 1]  # then one position per token
    assert len(list(stream)) == 3 and calls == [4, 1, 1, 1, 1]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(temperature=-0.1), "temperature"),
        (dict(top_k=0), "top_k"),
        (dict(top_p=0.0), "top_p"),
        (dict(top_p=1.5), "top_p"),
        (dict(max_new_tokens=-1), "max_new_tokens"),
    ],
)
def test_bad_arguments_are_refused_at_the_call(tiny_gpt, kwargs, message):
    args = dict(max_new_tokens=3) | kwargs
    with pytest.raises(ValueError, match=message):
        generate(tiny_gpt().eval(), torch.zeros(1, 1, dtype=torch.long), **args)


def test_a_uniform_model_samples_every_token(tiny_gpt):
    # Sanity for the whole loop: zero logits give each of the V tokens probability 1/V.
    model = tiny_gpt(vocab_size=8).eval()
    torch.nn.init.zeros_(model.tok_emb.weight)  # tied: the LM head is zero too
    g = torch.Generator().manual_seed(0)
    tokens = torch.cat(list(generate(model, torch.zeros(1, 1, dtype=torch.long), 100, generator=g)))
    assert set(tokens.tolist()) == set(range(8))
    assert math.isclose(tokens.float().mean().item(), 3.5, abs_tol=0.5)


def test_a_rewound_cache_forgets_its_last_position(tiny_gpt):
    model = tiny_gpt().eval()
    ids = torch.tensor([[3, 1, 4, 1, 5]])
    with torch.no_grad():
        caches = model.new_caches(1)
        model(ids[:, :4], caches=caches)
        model(torch.tensor([[9]]), caches=caches)  # a query read, then forgotten
        for cache in caches:
            cache.rewind()
        assert caches[0].length == 4
        logits = model(ids[:, 4:], caches=caches)[:, -1]
        assert torch.allclose(logits, model(ids)[:, -1], atol=1e-5)
    with pytest.raises(ValueError, match="cannot rewind 6"):
        caches[0].rewind(6)  # it holds 5
