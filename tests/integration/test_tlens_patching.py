"""TransformerLens's own patching functions (transformer_lens.patching) run on our GPT itself,
through its run_with_cache, run_with_hooks and cfg, on the pronoun twins of analysis.patching,
and give the project's own patching numbers (what generate.py --probe --patch reports) and, on
the same model exported with --export-hf, the numbers of TransformerLens's bridge."""

import json
import random
from dataclasses import asdict

import pytest
import torch

from analysis.interventions import replace_where
from analysis.patching import COLUMNS, make_pair, patch_group
from data.pronouns import examples
from data.tokenizer import train_tokenizer
from model.checkpoint import atomic_save
from model.gpt import GPTConfig
from model.hooks import hooks
from runs.export import export_hf
from runs.loading import load_run
from tests.helpers import RUN_TEXT, boot_bridge, loud_gpt

SAME = dict(atol=1e-5, rtol=0)  # float32 on every side


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """(transformer_lens.patching, our loaded run, the bridge on its export, the twins of one
    token length, clean ids, corrupt ids): a run folder holding a 2 x 2 x 32 model whose weights
    are 5x the usual scale (so patches move the logits, as in tests/unit/test_patching.py) and a BPE
    of the built-in sentences, exported as train.py --export-hf writes it, the bridge booted
    with the network shut."""
    patching = pytest.importorskip(
        "transformer_lens.patching",
        reason="the reference is TransformerLens: pip install -r requirements-test.txt",
    )
    folder = tmp_path_factory.mktemp("tlens_patching")
    text = RUN_TEXT + "\n".join(ex.text for ex in examples("dev") + examples("test"))
    tokenizer = train_tokenizer("bpe", text, 1000)  # many antecedents of one token
    (folder / "run").mkdir()
    tokenizer.save(folder / "run" / "tokenizer.txt")
    meta = {"tokenizer_file": "tokenizer.txt", "tokenizer_kind": "bpe"}
    (folder / "run" / "meta.json").write_text(json.dumps(meta))
    config = GPTConfig(
        vocab_size=tokenizer.vocab_size, block_size=128, n_layer=2, n_head=2, n_embd=32
    )
    model = loud_gpt(config, 5)
    ckpt = {"model": model.state_dict(), "model_config": asdict(config), "step": 0}
    atomic_save(ckpt, folder / "run" / "ckpt.pt")
    export_hf(folder / "run", folder / "hf")
    run = load_run(folder / "run")
    bridge = boot_bridge(folder / "hf")
    bridge.eval()
    rng = random.Random(0)
    pairs = [p for p in (make_pair(tokenizer, ex, 128, rng) for ex in examples("test")[:60]) if p]
    by_length = {}
    for p in pairs:
        by_length.setdefault(len(p.clean), []).append(p)
    # The length with most one-token antecedents (the stream test compares those), then most
    # pairs.
    group = max(by_length.values(), key=lambda g: (sum(len(p.antecedent) == 1 for p in g), len(g)))
    clean = torch.tensor([p.clean for p in group])
    corrupt = torch.tensor([p.corrupt for p in group])
    return patching, run, bridge, group, clean, corrupt


def logit_difference(pairs):
    """The metric of analysis.patching, per example: logit(clean next) - logit(twin's next) at
    the last position, as TransformerLens's reduce="none" wants it ([batch])."""
    b = torch.arange(len(pairs))
    clean_next = torch.tensor([p.clean_next for p in pairs])
    corrupt_next = torch.tensor([p.corrupt_next for p in pairs])
    return lambda logits: logits[b, -1, clean_next] - logits[b, -1, corrupt_next]


def tl_patch(setup, function, model):
    """TransformerLens's patching function `function` on `model` (ours or the bridge), per
    example: values with the example last."""
    patching, _, _, pairs, clean, corrupt = setup
    with torch.no_grad():
        _, clean_cache = model.run_with_cache(clean)
        result = getattr(patching, function)(
            model, corrupt, clean_cache, logit_difference(pairs), reduce="none"
        )
    return result.values


@pytest.fixture(scope="module")
def project(setup):
    """analysis.patching's own numbers on the same twins (Patched: LDs, example last)."""
    _, run, _, pairs, _, _ = setup
    return patch_group(run.model, pairs)


def test_head_outputs_by_position_are_the_projects_and_the_bridges(setup, project):
    _, run, bridge, pairs, clean, _ = setup
    ours = tl_patch(setup, "get_act_patch_attn_head_out_by_pos", run.model)
    L, H, B, T = 2, 2, len(pairs), clean.size(1)
    assert ours.shape == (L, T, H, B)
    # At the pronoun: the project's heads grid (hook_z of one head at the last position).
    torch.testing.assert_close(ours[:, T - 1].double(), project.heads, **SAME)
    # Before the antecedent both runs are the same tokens: a patch there changes nothing.
    for b, p in enumerate(pairs):
        before = ours[:, : min(p.antecedent), :, b]
        torch.testing.assert_close(before.double(), project.corrupt[b].expand_as(before), **SAME)
    assert (ours[:, T - 1] - project.corrupt).abs().max() > 1e-2  # the grid is not flat
    torch.testing.assert_close(
        tl_patch(setup, "get_act_patch_attn_head_out_by_pos", bridge), ours, **SAME
    )


def test_the_stream_by_position_is_the_projects_and_the_bridges(setup, project):
    _, run, bridge, pairs, clean, _ = setup
    ours = tl_patch(setup, "get_act_patch_resid_pre", run.model)
    T = clean.size(1)
    assert ours.shape == (2, T, len(pairs))
    stream = project.stream[:2]  # (L, column, B): resid_pre of each block (then resid_post)
    torch.testing.assert_close(ours[:, T - 1].double(), stream[:, COLUMNS.index("pronoun")], **SAME)
    # An antecedent of one token: the project's antecedent column is that one position.
    single = [(b, p.antecedent[0]) for b, p in enumerate(pairs) if len(p.antecedent) == 1]
    assert single
    for b, a in single:
        torch.testing.assert_close(
            ours[:, a, b].double(), stream[:, COLUMNS.index("antecedent"), b], **SAME
        )
    # The stream entering block 0 at the pronoun is the pronoun's embedding, the same in both
    # runs; entering block 1 it carries what attention brought from the antecedent.
    torch.testing.assert_close(ours[0, T - 1].double(), project.corrupt, **SAME)
    assert (ours[1, T - 1].double() - project.corrupt).abs().max() > 1e-2
    torch.testing.assert_close(tl_patch(setup, "get_act_patch_resid_pre", bridge), ours, **SAME)


@torch.no_grad()
def test_whole_patterns_are_the_projects_replace_where_and_the_bridges(setup, project):
    _, run, bridge, pairs, clean, corrupt = setup
    ours = tl_patch(setup, "get_act_patch_attn_head_pattern_all_pos", run.model)
    assert ours.shape == (2, 2, len(pairs))
    metric = logit_difference(pairs)
    _, cache = run.model.run_with_cache(clean, names_filter=lambda n: n.endswith("hook_pattern"))
    for l in range(2):
        name = f"blocks.{l}.attn.hook_pattern"
        for h in range(2):
            head = torch.zeros(1, 2, dtype=torch.bool)  # (B, H) of (B, H, T, S)
            head[0, h] = True
            with hooks(run.model, {name: replace_where(head, cache[name])}):
                torch.testing.assert_close(ours[l, h], metric(run.model(corrupt)), **SAME)
    assert (ours.double() - project.corrupt).abs().max() > 1e-3
    torch.testing.assert_close(
        tl_patch(setup, "get_act_patch_attn_head_pattern_all_pos", bridge), ours, **SAME
    )


@torch.no_grad()
def test_the_scalar_form_is_the_mean_of_the_examples(setup):
    """TransformerLens's default (reduce="scalar"), as its tutorials call it: one number a
    cell, here the mean logit difference of the twins."""
    patching, run, _, pairs, clean, corrupt = setup
    per_example = tl_patch(setup, "get_act_patch_attn_head_pattern_all_pos", run.model)
    _, clean_cache = run.model.run_with_cache(clean)
    metric = logit_difference(pairs)
    scalar = patching.get_act_patch_attn_head_pattern_all_pos(
        run.model, corrupt, clean_cache, lambda logits: metric(logits).mean()
    )
    torch.testing.assert_close(scalar, per_example.mean(-1), **SAME)


def test_direct_path_patching_is_the_bridges(setup):
    """TransformerLens's path patching from one head into each later head's query, key or value
    alone: on our GPT it reads W_O and our split q/k/v inputs; on the bridge its own."""
    patching, run, bridge, pairs, clean, corrupt = setup
    metric = logit_difference(pairs)

    def direct(model, component):
        with torch.no_grad():
            _, clean_cache = model.run_with_cache(clean)
            _, corrupt_cache = model.run_with_cache(corrupt)
            return patching.get_act_patch_direct_path(
                model,
                corrupt,
                clean_cache,
                corrupt_cache,
                lambda logits: metric(logits).mean(),
                src_layer=0,
                src_head=1,
                component=component,
            )

    for component in ("q", "k", "v"):
        ours = direct(run.model, component)
        assert ours.shape == (2, 2)
        torch.testing.assert_close(direct(bridge, component), ours, **SAME)
    with torch.no_grad():
        corrupt_ld = metric(run.model(corrupt)).mean()
    assert (ours[1] - corrupt_ld).abs().max() > 1e-3  # the value path moves the metric
