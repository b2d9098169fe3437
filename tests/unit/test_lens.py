"""The logit lens at the pronoun and the residual stream's hook points it reads: exact on a
tiny model."""

import pytest
import torch

from analysis.lens import logit_lens, stream_points
from data.pronouns import examples
from data.tokenizer import train_tokenizer
from model.hooks import hooks, run_with_cache
from reports.lens_report import format_lens
from tests.helpers import RUN_TEXT


def test_the_stream_is_recorded_at_every_block_and_its_last_point_is_what_the_head_reads(tiny_gpt):
    model = tiny_gpt().eval()
    idx = torch.randint(0, 50, (2, 10))
    points = stream_points(2)
    assert points == [
        "blocks.0.hook_resid_pre",
        "blocks.1.hook_resid_pre",
        "blocks.1.hook_resid_post",
    ]
    with torch.no_grad():
        logits, cache = run_with_cache(model, idx, points)
    stream = [cache[p] for p in points]
    assert all(s.shape == (2, 10, 32) for s in stream)
    torch.testing.assert_close(model.lm_head(model.ln_f(stream[-1])), logits)
    first = model.tok_emb(idx) + model.pos_emb(torch.arange(10))
    torch.testing.assert_close(stream[0], first)


def test_patching_the_whole_last_stream_gives_the_other_runs_logits_and_a_self_patch_nothing(
    tiny_gpt,
):
    model = tiny_gpt().eval()
    a, b = torch.randint(0, 50, (1, 8)), torch.randint(0, 50, (1, 8))
    last, middle = "blocks.1.hook_resid_post", "blocks.1.hook_resid_pre"
    with torch.no_grad():
        clean, seen = run_with_cache(model, a, [last])
        with hooks(model, {last: lambda x, hook: seen[last]}):
            patched = model(b)
        torch.testing.assert_close(patched, clean)
        plain, own = run_with_cache(model, b, [middle])
        with hooks(model, {middle: lambda x, hook: own[middle]}):
            assert torch.equal(model(b), plain)
    with pytest.raises(ValueError, match="no hook point 'blocks.2.hook_resid_pre'"):
        with hooks(model, {"blocks.2.hook_resid_pre": lambda x, hook: clean}):
            pass


def test_the_lens_reads_each_point_and_its_last_row_is_the_models_prediction(tiny_gpt):
    tokenizer = train_tokenizer("char", RUN_TEXT + "".join(ex.text for ex in examples("test")))
    model = tiny_gpt(vocab_size=tokenizer.vocab_size, block_size=128).eval()
    lens = logit_lens(model, tokenizer, examples("test")[:20])
    assert lens["points"] == ["embedding", "block 0", "block 1"] and lens["n"] == 20
    # The last point by hand: the model's own probability of each item's next character.
    probs = []
    for ex in examples("test")[:20]:
        ids = tokenizer.encode(ex.text)
        q = ex.pronoun[1] - 1  # one character per token: the pronoun's last character
        with torch.no_grad():
            p = torch.softmax(model(torch.tensor([ids[: q + 1]]))[0, -1], -1)
        probs.append(p[ids[q + 1]].item())
    assert lens["mean_probability"][-1] == pytest.approx(sum(probs) / len(probs), rel=1e-5)
    assert all(len(row) == 5 for row in lens["example"]["top"])
    text = format_lens(lens)
    assert "block 1" in text and "embedding" in text
    ranked_first = {**lens, "median_rank": [9.0, 1.0, 1.0]}
    assert "first choice of the median example from block 0 on" in format_lens(ranked_first)
    never = {**lens, "median_rank": [9.0, 3.0, 2.0]}
    assert "At no point is the true next token the median example's first choice" in format_lens(
        never
    )


def test_the_example_is_the_same_whole_sentence_from_its_start_in_the_report_and_on_the_page():
    from reports.depth_tables import lens_section
    from reports.lens_report import lens_example_text

    text = "The lovely turtle kept away from the silver flower. Busy and greedy, it"
    lens = {
        "points": ["embedding", "block 0"],
        "mean_probability": [0.1, 0.2],
        "median_rank": [9, 2],
        "top1_share": [0.0, 0.3],
        "n": 300,
        "skipped": 0,
        "example": {"text": text, "next": " swam", "top": [[[" it", 1.0]], [[" swam", 0.5]]]},
    }
    assert lens_example_text(lens["example"]) == text  # whole: not its last 40 or 60 characters
    assert f"“{text}”" in format_lens(lens) and f"“{text}”" in lens_section(lens)
    # A long one starts at a sentence's start, after "… ", the same in both.
    long = {**lens["example"], "text": "Once upon a time there was a farm. " * 8 + text}
    shown = lens_example_text(long)
    assert len(shown) <= 162 and shown.endswith(text) and shown[2:3].isupper()
    assert shown in format_lens({**lens, "example": long})
    assert shown in lens_section({**lens, "example": long})


def test_the_lens_runs_in_bounded_batches_with_the_same_numbers(tiny_gpt, monkeypatch):
    import analysis.lens

    tokenizer = train_tokenizer("char", RUN_TEXT + "".join(ex.text for ex in examples("test")))
    model = tiny_gpt(vocab_size=tokenizer.vocab_size, block_size=128).eval()
    sizes = []
    # Every pass, with or without the unembedding, embeds its (B, T) ids first.
    model.tok_emb.register_forward_pre_hook(lambda module, args: sizes.append(args[0].shape[0]))
    monkeypatch.setattr(analysis.lens, "BATCH_SIZE", 10**9)
    whole = logit_lens(model, tokenizer, examples("test")[:80])
    assert max(sizes) > 3  # some length has more than 3 items: the bound below splits it
    sizes.clear()
    monkeypatch.setattr(analysis.lens, "BATCH_SIZE", 3)
    bounded = logit_lens(model, tokenizer, examples("test")[:80])
    assert max(sizes) == 3
    assert bounded["median_rank"] == whole["median_rank"]
    assert bounded["top1_share"] == whole["top1_share"]
    assert bounded["mean_probability"] == pytest.approx(whole["mean_probability"], rel=1e-6)
    assert bounded["example"] == whole["example"]
