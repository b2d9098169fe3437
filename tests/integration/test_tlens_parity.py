"""TransformerLens reads our model as we do: its TransformerBridge, booted on the --export-hf
folder of a small trained run, holds the same numbers as our run_with_cache at every hook point
both have, and the same edit of a point moves both models' logits alike."""

from contextlib import contextmanager

import pytest
import torch

from model.hooks import hooks, run_with_cache
from runs.loading import load_run
from tests.helpers import boot_bridge

SAME = dict(atol=1e-5, rtol=0)  # float32 on both sides
# The points of one block (blocks.{l}.*), then those around the blocks: all of ours.
BLOCK_POINTS = [
    "hook_resid_pre",
    "ln1.hook_scale",
    "ln1.hook_normalized",
    "attn.hook_q",
    "attn.hook_k",
    "attn.hook_v",
    "attn.hook_attn_scores",
    "attn.hook_pattern",
    "attn.hook_z",
    "attn.hook_result",
    "hook_attn_out",
    "hook_resid_mid",
    "hook_mlp_in",
    "ln2.hook_scale",
    "ln2.hook_normalized",
    "mlp.hook_pre",
    "mlp.hook_post",
    "hook_mlp_out",
    "hook_resid_post",
]
OUTER_POINTS = ["hook_embed", "hook_pos_embed", "ln_final.hook_scale", "ln_final.hook_normalized"]
SPLIT_INPUTS = ["hook_q_input", "hook_k_input", "hook_v_input"]


@pytest.fixture(scope="module")
def pair(corpus, trained_export):
    """(our run, the bridge on its export, two windows of its text's tokens): conftest's
    trained run and its --export-hf folder, the bridge booted with the network shut."""
    run_folder, hf_folder = trained_export
    bridge = boot_bridge(hf_folder)  # first: skips the test without TransformerLens
    run = load_run(run_folder)
    text = (corpus / "text.txt").read_text()
    ids = run.tokenizer.encode(text)[: 2 * run.model.config.block_size]
    return run, bridge, torch.tensor(ids).view(2, -1)


@contextmanager
def options(bridge, *names):
    """The bridge with its options `names` (set_use_NAME) on for the block, off after it."""
    for name in names:
        getattr(bridge, f"set_use_{name}")(True)
    try:
        yield bridge
    finally:
        for name in names:
            getattr(bridge, f"set_use_{name}")(False)


@pytest.fixture(scope="module")
def caches(pair):
    """(our logits, our cache of every point, the bridge's logits, its cache) on the windows,
    the bridge computing each head's write apart (hook_result) and giving the MLP its own copy
    of the stream (hook_mlp_in), as ours does."""
    run, bridge, tokens = pair
    with torch.no_grad(), options(bridge, "attn_result", "hook_mlp_in"):
        return (*run_with_cache(run.model, tokens), *bridge.run_with_cache(tokens))


def test_every_point_of_ours_is_one_of_the_bridges_with_its_shape(pair, caches):
    layers = range(pair[0].model.config.n_layer)
    _, ours, _, theirs = caches
    assert sorted(ours) == sorted(
        OUTER_POINTS + [f"blocks.{l}.{p}" for l in layers for p in BLOCK_POINTS]
    )
    missing = [name for name in ours if name not in theirs]
    assert missing == [], f"TransformerLens has no point named {missing}"
    assert {name: tuple(theirs[name].shape) for name in ours} == {
        name: tuple(value.shape) for name, value in ours.items()
    }


@pytest.mark.parametrize("point", OUTER_POINTS + BLOCK_POINTS)
def test_each_point_holds_the_bridges_numbers(pair, caches, point):
    layers = range(pair[0].model.config.n_layer)
    _, ours, _, theirs = caches
    names = [point] if point in OUTER_POINTS else [f"blocks.{l}.{point}" for l in layers]
    for name in names:
        value, other = ours[name], theirs[name]
        if point == "attn.hook_attn_scores":
            T = value.shape[-1]
            allowed = torch.ones(T, T, dtype=torch.bool).tril()  # (T, S): keys a query may read
            # Masked scores: ours -inf, the bridge's the most negative float; both weigh 0.
            assert bool((value[..., ~allowed] == float("-inf")).all()), name
            assert bool((other[..., ~allowed] <= torch.finfo(other.dtype).min).all()), name
            value, other = value[..., allowed], other[..., allowed]
        torch.testing.assert_close(other, value, **SAME, msg=lambda m, name=name: f"{name}: {m}")


def test_the_logits_are_the_bridges(caches):
    logits, _, their_logits, _ = caches
    torch.testing.assert_close(their_logits, logits, **SAME)


def knock_out_first_key(pattern, head=1):
    """Head `head` no longer reads key 0 from query 1 on (query 0 has no other key); its other
    weights scaled up to sum to 1 again."""
    pattern = pattern.clone()
    pattern[:, head, 1:, 0] = 0  # (B, H, T, S)
    return pattern / pattern.sum(-1, keepdim=True)


def reverse_head_0(stream):
    """Head 0's copy of the stream read backwards in time: (B, T, H, C), other heads as they
    were. An edit that only split inputs can make (one head's query, key or value alone)."""
    stream = stream.clone()
    stream[:, :, 0] = stream[:, :, 0].flip(1)
    return stream


def reverse_time(stream):
    """(B, T, C) read backwards in time."""
    return stream.flip(1)


# point -> (the edit, the bridge's options that make the point)
EDITS = {
    "blocks.0.attn.hook_pattern": (knock_out_first_key, ()),
    "blocks.1.hook_q_input": (reverse_head_0, ("split_qkv_input",)),
    "blocks.1.hook_k_input": (reverse_head_0, ("split_qkv_input",)),
    "blocks.1.hook_v_input": (reverse_head_0, ("split_qkv_input",)),
    "blocks.0.hook_mlp_in": (reverse_time, ("hook_mlp_in",)),
}


@pytest.mark.parametrize("point", EDITS)
def test_the_same_edit_moves_both_models_logits_alike(pair, point):
    run, bridge, tokens = pair
    edit, bridge_options = EDITS[point]
    with torch.no_grad(), options(bridge, *bridge_options):
        clean = run.model(tokens)
        with hooks(run.model, {point: lambda value, hook: edit(value)}):
            ours = run.model(tokens)
        theirs = bridge.run_with_hooks(tokens, fwd_hooks=[(point, lambda value, hook: edit(value))])
    assert (ours - clean).abs().max() > 1e-3  # the edit changes the logits, far beyond SAME
    torch.testing.assert_close(theirs, ours, **SAME)


def test_split_qkv_inputs_are_the_bridges(pair):
    run, bridge, tokens = pair
    names = [f"blocks.{l}.{p}" for l in range(run.model.config.n_layer) for p in SPLIT_INPUTS]
    with torch.no_grad(), options(bridge, "split_qkv_input"):
        logits, ours = run_with_cache(run.model, tokens, names=names)
        their_logits, theirs = bridge.run_with_cache(tokens, names_filter=names)
    for name in names:
        assert ours[name].shape == theirs[name].shape, name
        torch.testing.assert_close(theirs[name], ours[name], **SAME)
    torch.testing.assert_close(their_logits, logits, **SAME)


def test_the_docs_recipe_runs_on_text_with_the_bridges_default_bos(pair):
    """docs/guide/models.md's recipe as written: run_with_cache on a string, TransformerLens
    prepending its beginning-of-text token, which the export declares inside the vocabulary
    (the newline, for a bpe run) rather than one past its end."""
    run, bridge, _ = pair
    text = "It was the cat."  # short: the tiny model's window is 32 tokens
    ours = run.tokenizer.encode(text)
    newline = run.tokenizer.encode("\n")
    assert len(ours) < run.model.config.block_size
    assert bridge.to_tokens(text).tolist() == [newline + ours]
    assert bridge.to_tokens(text, prepend_bos=False).tolist() == [ours]
    with torch.no_grad():
        their_logits, cache = bridge.run_with_cache(text)
        logits = run.model(torch.tensor([newline + ours]))
    torch.testing.assert_close(their_logits, logits, **SAME)
    assert cache["blocks.0.attn.hook_pattern"].shape[-1] == len(ours) + 1
