"""A head's QK and OV circuits read from its weights alone equal what the model computes at its
hook points on a sentence of those tokens with no position embedding."""

import pytest
import torch

from analysis.weight_views import ov_view, qk_view
from data.tokenizer import train_tokenizer
from model.gpt import GPT, GPTConfig
from model.hooks import run_with_cache

WORDS = [" dog", " cat", " it", " ran"]


@pytest.fixture(scope="module")
def model_and_tokenizer():
    tokenizer = train_tokenizer("bpe", "the dog and the cat ran because it was tired. " * 50, 300)
    assert all(len(tokenizer.encode(w)) == 1 for w in WORDS)
    torch.manual_seed(0)
    config = GPTConfig(
        vocab_size=tokenizer.vocab_size, block_size=16, n_layer=2, n_head=2, n_embd=32
    )
    model = GPT(config).eval()
    with torch.no_grad():
        model.pos_emb.weight.zero_()  # the views leave positions out: so does this model
        for name, p in model.named_parameters():
            if p.dim() == 2 and "pos" not in name:
                p.mul_(5)
    return model, tokenizer


def test_qk_scores_are_the_models_scores_of_those_tokens(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    view = qk_view(model, tokenizer, " it", [" dog", " cat"], 0, 1)
    for key in (" dog", " cat"):
        ids = torch.tensor([tokenizer.encode(key) + tokenizer.encode(" it")])
        _, cache = run_with_cache(model, ids, ["blocks.0.attn.hook_attn_scores"])
        score = cache["blocks.0.attn.hook_attn_scores"][0, 1, 1, 0].item()  # head 1, "it" -> key
        assert view["scores"][key] == pytest.approx(score, abs=1e-4)
    assert sum(view["weights"].values()) == pytest.approx(1.0)


def test_ov_top_tokens_are_the_heads_write_read_through_the_unembedding(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    view = ov_view(model, tokenizer, " dog", 0, 0, top=5)
    ids = torch.tensor([tokenizer.encode(" dog")])  # one token: all its attention on itself
    _, cache = run_with_cache(model, ids, ["blocks.0.attn.hook_result"])
    write = cache["blocks.0.attn.hook_result"][0, 0, 0]  # (C,): head 0's write
    with torch.no_grad():
        logits = model.lm_head(model.ln_f(write))[: tokenizer.vocab_size]
    top = (logits - logits.mean()).topk(5)
    assert [t["token"] for t in view["top"]] == [
        tokenizer.decode([i]) for i in top.indices.tolist()
    ]
    assert [t["logit"] for t in view["top"]] == pytest.approx(top.values.tolist(), abs=1e-4)


def test_what_the_views_cannot_read_is_refused(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    with pytest.raises(ValueError, match="tokens; these views read one token"):
        qk_view(model, tokenizer, " it", [" the dog"], 0, 0)
    with pytest.raises(ValueError, match="not a head of this model"):
        ov_view(model, tokenizer, " dog", 2, 0)
    rotary = GPT(
        GPTConfig(vocab_size=300, block_size=16, n_layer=1, n_head=2, n_embd=32, rotary=True)
    )
    with pytest.raises(ValueError, match="rotary"):
        ov_view(rotary, tokenizer, " dog", 0, 0)
