"""The route the docs lead with (docs/reference/python.md): a run exported with --export-hf and
opened with TransformerLens 4's own TransformerBridge, where the Exploratory demo's key calls
(run_with_cache, accumulated_resid, apply_ln_to_stack, decompose_resid, stack_head_results,
W_U, tokens_to_residual_directions) run on our numbers. And the project's own TransformerLens-style
layer beside it: hooks live as long as on the bridge, and what it lacks names the bridge."""

import re

import pytest
import torch

from model.hooked import LENS_ONLY
from model.hooks import run_with_cache
from runs.loading import load_run
from tests.helpers import ROOT, boot_bridge, offline, one_line

SAME = dict(atol=1e-5, rtol=0)  # float32 on both sides
PAGE = ROOT / "docs" / "reference" / "python.md"


@pytest.fixture(scope="module")
def run_and_tokens(corpus, trained_export):
    """(conftest's trained run, two windows of its text's tokens)."""
    run = load_run(trained_export[0])
    ids = run.tokenizer.encode((corpus / "text.txt").read_text())
    return run, torch.tensor(ids[: 2 * run.model.config.block_size]).view(2, -1)


@pytest.fixture(scope="module")
def bridge(trained_export):
    """The bridge on the export as booted: GPT-2's raw weights, which are ours."""
    return boot_bridge(trained_export[1]).eval()


@torch.no_grad()
def test_the_demos_cache_calls_on_the_raw_bridge_give_our_numbers(run_and_tokens, bridge):
    run, tokens = run_and_tokens
    model, V = run.model, run.tokenizer.vocab_size
    logits, cache = bridge.run_with_cache(tokens)
    our_logits, ours = run_with_cache(model, tokens)
    torch.testing.assert_close(logits, our_logits, **SAME)
    assert torch.equal(bridge.W_U, model.lm_head.weight[:V].T)  # (C, V), the padding left out
    assert torch.equal(bridge.W_E, model.tok_emb.weight[:V])
    assert torch.equal(bridge.W_pos, model.pos_emb.weight)

    # The stream at the last position, component by component (the demo's per-layer view).
    parts, labels = cache.decompose_resid(layer=-1, pos_slice=-1, return_labels=True)
    assert labels == ["embed", "pos_embed", "0_attn_out", "0_mlp_out", "1_attn_out", "1_mlp_out"]
    names = ["hook_embed", "hook_pos_embed"] + [
        f"blocks.{l}.hook_{part}_out" for l in range(2) for part in ("attn", "mlp")
    ]
    torch.testing.assert_close(parts, torch.stack([ours[n][:, -1] for n in names]), **SAME)
    torch.testing.assert_close(parts.sum(0), ours["resid_post", -1][:, -1], **SAME)

    # Each head's write at the last position (the demo's per-head view), ours through hook_result.
    heads, labels = cache.stack_head_results(layer=-1, pos_slice=-1, return_labels=True)
    assert labels == ["L0H0", "L0H1", "L1H0", "L1H1"]
    _, written = run_with_cache(model, tokens, lambda name: name.endswith("hook_result"))
    want = torch.stack([written["result", l][:, -1, h] for l in range(2) for h in range(2)])
    torch.testing.assert_close(heads, want, **SAME)

    # The logit lens: the accumulated stream, normalised as the final LayerNorm does, then read by
    # W_U, is the logits at the last block.
    stack = cache.accumulated_resid(layer=-1, incl_mid=True, pos_slice=-1)
    normalized = cache.apply_ln_to_stack(stack, layer=-1, pos_slice=-1)
    torch.testing.assert_close(normalized[-1], ours["ln_final.hook_normalized"][:, -1], **SAME)
    ln_f = model.ln_f
    lens = (normalized[-1] * ln_f.weight + ln_f.bias) @ bridge.W_U + bridge.b_U
    torch.testing.assert_close(lens, our_logits[:, -1, :V], **SAME)


def docs_block():
    """The python block of docs/reference/python.md's section on the bridge."""
    section = PAGE.read_text().split("\n## TransformerLens: the bridge on the export\n", 1)[1]
    return re.search(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.S).group(1)


@torch.no_grad()
def test_the_docs_block_runs_on_the_export_and_its_shares_add_up(run_and_tokens, trained_export):
    """The Exploratory demo's direct logit attribution, as the docs write it: on the bridge
    processed as the demo loads GPT-2, the parts of the last position's stream, read along
    " it"'s column of W_U, add up to the logit of " it", and each layer's heads to that layer's
    attention write."""
    pytest.importorskip("transformer_lens", reason="pip install -r requirements-test.txt")
    run = run_and_tokens[0]
    code = docs_block()
    assert code.count('"RUN_FOLDER"') == 1
    scope = {}
    with offline():
        code = code.replace('"RUN_FOLDER"', repr(str(trained_export[0])))
        exec(compile(code, "docs/reference/python.md", "exec"), scope)
    model, cache, logits, it = (scope[k] for k in ("model", "cache", "logits", "it"))
    tokens = run.tokenizer.encode("The dog barked because")
    assert scope["tokens"].tolist() == [tokens]
    # Processing moves each position's logits by a constant, which no probability sees.
    ours = run.model(torch.tensor([tokens]))
    torch.testing.assert_close(logits.log_softmax(-1), ours.log_softmax(-1), atol=1e-4, rtol=0)
    (answer,) = run.tokenizer.encode(" it")
    assert torch.equal(it, model.W_U[:, answer])
    logit = logits[:, -1, answer] - model.b_U[answer]  # less the final LayerNorm's folded bias
    assert scope["labels"] == ["embed", "pos_embed"] + [
        f"{l}_{part}_out" for l in range(2) for part in ("attn", "mlp")
    ]
    torch.testing.assert_close(scope["by_part"].sum(0), logit, atol=1e-4, rtol=0)

    def read(stack):  # the docs' reading of a stack at the last position
        return cache.apply_ln_to_stack(stack, layer=-1, pos_slice=-1) @ it

    lens = read(cache.accumulated_resid(layer=-1, incl_mid=True, pos_slice=-1))
    torch.testing.assert_close(lens[-1], logit, atol=1e-4, rtol=0)
    assert scope["head_labels"] == ["L0H0", "L0H1", "L1H0", "L1H1"]
    by_head = scope["by_head"].view(2, 2, -1)  # (L, H, B)
    for layer in range(2):
        attention = read(cache["attn_out", layer][:, -1] - model.b_O[layer])
        torch.testing.assert_close(by_head[layer].sum(0), attention, atol=1e-4, rtol=0)


def hook_lifetimes(model, tokens):
    """Which of its hooks on hook_embed fire in each call of a notebook's sequence of calls:
    add_hook (kept), a permanent add_hook, a run_with_hooks hook (taken off after it), one with
    reset_hooks_end=False (kept), then reset_hooks() and reset_hooks(including_permanent=True)."""
    seen, steps = [], []

    def note(tag):
        return lambda value, hook: seen.append(tag)

    def fired(call, *args, **kwargs):
        seen.clear()
        call(tokens, *args, **kwargs)
        steps.append(sorted(seen))

    model.add_hook("hook_embed", note("added"))
    model.add_hook("hook_embed", note("permanent"), is_permanent=True)
    fired(model)
    fired(model.run_with_cache, names_filter="hook_embed")
    fired(model.run_with_hooks, fwd_hooks=[("hook_embed", note("passing"))])
    fired(model)
    fired(model.run_with_hooks, fwd_hooks=[("hook_embed", note("kept"))], reset_hooks_end=False)
    fired(model)
    model.reset_hooks()
    fired(model)
    model.reset_hooks(including_permanent=True)
    fired(model)
    return steps


@torch.no_grad()
def test_hooks_live_as_long_as_on_the_bridge(run_and_tokens, bridge):
    run, tokens = run_and_tokens
    ours = hook_lifetimes(run.model, tokens)
    assert ours == [
        ["added", "permanent"],
        ["added", "permanent"],  # run_with_cache takes off only its own hooks
        ["added", "passing", "permanent"],
        ["added", "permanent"],
        ["added", "kept", "permanent"],
        ["added", "kept", "permanent"],
        ["permanent"],
        [],
    ]
    assert hook_lifetimes(bridge, tokens) == ours


@pytest.mark.parametrize("name", sorted(LENS_ONLY))
def test_a_weight_view_it_lacks_names_the_bridge_which_has_it(tiny_hooked_gpt, bridge, name):
    model = tiny_hooked_gpt()
    with pytest.raises(AttributeError) as e:
        getattr(model, name)
    one_line(e, f"has no {name}", "to_transformer_lens", "TransformerBridge", "python.md")
    assert not hasattr(model, name)
    assert hasattr(bridge, name)  # the route it names leads to it


def test_what_the_model_has_is_found_as_before(tiny_hooked_gpt):
    model = tiny_hooked_gpt()
    assert model.lm_head.weight is model.tok_emb.weight  # a parameter through a submodule
    assert model.blocks[0].attn.W_O.shape == (4, 8, 32)  # the one view there is: (H, D, C)
    with pytest.raises(AttributeError) as e:
        model.W_nothing  # noqa: B018  not one of TransformerLens's names: nn.Module's own error
    assert "TransformerBridge" not in str(e.value) and "W_nothing" in str(e.value)


@pytest.mark.slow
@torch.no_grad()
def test_one_call_gives_transformer_lens_own_model_of_a_run_folder_offline(
    run_and_tokens, trained_export
):
    """runs.bridge.to_transformer_lens: the Exploratory demo's calls (decompose_resid,
    stack_head_results, apply_ln_to_stack, logit_attrs) on TransformerLens's model of the run
    folder, booted with the network shut, and the parts add up to the logit."""
    pytest.importorskip("transformer_lens", reason="pip install -r requirements-test.txt")
    from runs.bridge import to_transformer_lens

    run, tokens = run_and_tokens
    with offline():
        model = to_transformer_lens(trained_export[0], compatibility=True)
    logits, cache = model.run_with_cache(tokens)
    ours = run.model(tokens)[..., : run.tokenizer.vocab_size]
    # compatibility mode centres the unembedding: the same log-probabilities, logits shifted
    torch.testing.assert_close(logits.log_softmax(-1), ours.log_softmax(-1), atol=1e-4, rtol=0)
    answer = tokens[:, -1]
    parts, labels = cache.decompose_resid(layer=-1, pos_slice=-1, return_labels=True)
    heads, head_labels = cache.stack_head_results(layer=-1, pos_slice=-1, return_labels=True)
    assert labels[:2] == ["embed", "pos_embed"] and head_labels == ["L0H0", "L0H1", "L1H0", "L1H1"]
    by_part = cache.logit_attrs(parts, tokens=answer, pos_slice=-1)  # (parts, B)
    want = logits[torch.arange(len(answer)), -1, answer] - model.b_U[answer]
    torch.testing.assert_close(by_part.sum(0), want, atol=1e-4, rtol=0)
    normalized = cache.apply_ln_to_stack(heads, layer=-1, pos_slice=-1)
    assert (
        normalized.shape == heads.shape
        and cache.logit_attrs(heads, tokens=answer, pos_slice=-1).shape[0] == 4
    )
