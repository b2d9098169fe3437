"""Activation patching on counterfactual twins: exact at the ends, nothing from a self-patch,
and the batched grid equal to a plain loop over examples."""

import random

import pytest
import torch

from analysis.interventions import replace_where
from analysis.patching import COLUMNS, activation_patching, make_pair, patch_group, recovered
from data.pronouns import examples
from data.tokenizer import train_tokenizer
from model.hooks import hooks, run_with_cache
from reports.text_reports import format_patching
from tests.helpers import RUN_TEXT, loud_gpt


@pytest.fixture(scope="module")
def setup():
    """A BPE of the built-in sentences (words keep their leading space, so the token after the
    pronoun is the continuation's first), a tiny model whose weights are 5x the usual scale (so
    that patches move the logits), and the test set's twin pairs."""
    text = RUN_TEXT + "\n".join(ex.text for ex in examples("dev") + examples("test"))
    tokenizer = train_tokenizer("bpe", text, 600)
    from model.gpt import GPTConfig

    config = GPTConfig(
        vocab_size=tokenizer.vocab_size, block_size=128, n_layer=2, n_head=2, n_embd=32
    )
    model = loud_gpt(config, 5).eval()
    rng = random.Random(0)
    pairs = [p for p in (make_pair(tokenizer, ex, 128, rng) for ex in examples("test")[:60]) if p]
    return model, tokenizer, pairs


def test_a_twin_differs_only_at_the_antecedent_and_in_its_continuation(setup):
    _, tokenizer, pairs = setup
    assert len(pairs) >= 30
    for p in pairs:
        assert len(p.clean) == len(p.corrupt)
        assert (
            [i for i, (a, b) in enumerate(zip(p.clean, p.corrupt)) if a != b]
            == [i for i in p.antecedent if p.clean[i] != p.corrupt[i]]
            != []
        )
        assert p.clean_next != p.corrupt_next


def by_length(pairs):
    groups = {}
    for p in pairs:
        groups.setdefault(len(p.clean), []).append(p)
    return max(groups.values(), key=len)


def test_the_last_stream_at_the_pronoun_recovers_exactly_1_and_a_self_patch_0(setup):
    model, _, pairs = setup
    group = by_length(pairs)
    clean, corrupt, heads, stream, mlps = patch_group(model, group)
    pronoun = COLUMNS.index("pronoun")
    assert recovered(stream[-1, pronoun], clean, corrupt).item() == pytest.approx(1.0, abs=1e-9)
    assert recovered(stream[0, COLUMNS.index("between")], clean, corrupt).item() == pytest.approx(
        0.0, abs=1e-9
    )
    assert mlps.shape == (2, len(COLUMNS), len(group))
    _, _, self_heads, self_stream, self_mlps = patch_group(model, group, source="corrupt")
    assert torch.allclose(self_heads, corrupt.expand_as(self_heads), atol=1e-9)
    assert torch.allclose(self_stream, corrupt.expand_as(self_stream), atol=1e-9)
    assert torch.allclose(self_mlps, corrupt.expand_as(self_mlps), atol=1e-9)


def test_the_heads_grid_equals_patching_one_example_at_a_time(setup):
    model, _, pairs = setup
    group = by_length(pairs)[:4]
    _, _, heads, _, mlps = patch_group(model, group)
    for b, p in enumerate(group):
        T = len(p.clean)
        with torch.no_grad():
            _, seen = run_with_cache(model, torch.tensor([p.clean]))
        for l in range(2):
            for h in range(2):
                where = torch.zeros(1, T, 2, dtype=torch.bool)  # hook_z is (B, T, H, D)
                where[0, T - 1, h] = True
                z = f"blocks.{l}.attn.hook_z"
                with torch.no_grad(), hooks(model, {z: replace_where(where, seen[z])}):
                    last = model(torch.tensor([p.corrupt]))[0, -1]
                expected = (last[p.clean_next] - last[p.corrupt_next]).item()
                assert heads[l, h, b].item() == pytest.approx(expected, abs=1e-5)
            # One MLP's output at the pronoun, patched by hand the same way.
            where = torch.zeros(1, T, dtype=torch.bool)
            where[0, T - 1] = True
            m = f"blocks.{l}.hook_mlp_out"
            with torch.no_grad(), hooks(model, {m: replace_where(where, seen[m])}):
                last = model(torch.tensor([p.corrupt]))[0, -1]
            expected = (last[p.clean_next] - last[p.corrupt_next]).item()
            assert mlps[l, COLUMNS.index("pronoun"), b].item() == pytest.approx(expected, abs=1e-5)


def test_the_result_has_intervals_and_a_report(setup):
    model, tokenizer, _ = setup
    result = activation_patching(model, tokenizer, examples("test")[:60], resamples=200)
    assert len(result["heads"]) == 2 and len(result["stream"]) == 3 and result["n"] >= 30
    assert len(result["mlps"]) == 2 and len(result["mlps"][0]) == len(COLUMNS)
    cell = result["heads"][0][0]
    lo, hi = cell["recovered_ci"]
    assert lo <= cell["recovered"] <= hi
    assert result["stream"][-1][2]["recovered"] == pytest.approx(1.0, abs=1e-9)
    text = format_patching(result)
    assert "each head's output at the pronoun patched" in text and "pronoun" in text
    few = activation_patching(model, tokenizer, examples("test")[:8], resamples=200)
    assert "recovered_ci" not in few["heads"][0][0] and "too few" in format_patching(few)


def test_patching_runs_in_bounded_batches_with_the_same_numbers(setup, monkeypatch):
    import analysis.patching

    model, tokenizer, _ = setup
    sizes = []
    handle = model.register_forward_pre_hook(lambda module, args: sizes.append(args[0].shape[0]))
    try:
        monkeypatch.setattr(analysis.patching, "BATCH_SIZE", 10**9)
        whole = activation_patching(model, tokenizer, examples("test")[:60], resamples=200)
        assert max(sizes) > 4  # some length has more than 4 pairs: the bound below splits it
        sizes.clear()
        monkeypatch.setattr(analysis.patching, "BATCH_SIZE", 4)
        bounded = activation_patching(model, tokenizer, examples("test")[:60], resamples=200)
    finally:
        handle.remove()
    assert max(sizes) == 4 and bounded["n"] == whole["n"]
    for kind in ("heads", "stream", "mlps"):
        for row_b, row_w in zip(bounded[kind], whole[kind]):
            for b, w in zip(row_b, row_w):
                assert b["recovered"] == pytest.approx(w["recovered"], rel=1e-6, abs=1e-9)
                assert b["recovered_ci"] == pytest.approx(w["recovered_ci"], rel=1e-6, abs=1e-9)
