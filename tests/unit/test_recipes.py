"""The recipes of docs/reference/python.md's "Looking inside from Python", run as written on a
tiny model, with what each one computes checked."""

import re

import pytest
import torch

from data.tokenizer import train_tokenizer
from model.hooks import hooks, run_with_cache
from tests.helpers import ROOT, RUN_TEXT

PAGE = ROOT / "docs" / "reference" / "python.md"
SECTION = PAGE.read_text().split("## Looking inside from Python")[1]
RECIPES = re.findall(r"```python\n(.*?)```", SECTION.split("\n## ")[0], re.S)


def run_recipe(code, model, idx):
    scope = {"model": model, "idx": idx}
    exec(compile(code, "docs/reference/python.md", "exec"), scope)
    return scope


def test_there_are_four_recipes():
    assert len(RECIPES) == 4  # TransformerLens's way, then the project's three


@pytest.fixture
def model_and_idx(tiny_gpt):
    return tiny_gpt().eval(), torch.randint(
        0, 50, (1, 10), generator=torch.Generator().manual_seed(0)
    )


def test_the_transformerlens_recipe_caches_patterns_and_zero_ablates_a_head(tiny_hooked_gpt):
    tokenizer = train_tokenizer("char", RUN_TEXT, None)
    model = tiny_hooked_gpt(vocab_size=tokenizer.vocab_size, block_size=64).eval()
    model.set_tokenizer(tokenizer)  # as load_run attaches the run's
    scope = run_recipe(RECIPES[0], model, None)
    tokens = scope["tokens"]
    assert tokens.tolist() == [
        tokenizer.encode("The animal went out on a hunt because it was hungry.")
    ]
    assert "".join(scope["words"]) == tokenizer.decode(tokens[0].tolist())
    with torch.no_grad():
        _, cache = run_with_cache(model, tokens, ["blocks.0.attn.hook_pattern"])
        torch.testing.assert_close(scope["pattern"], cache["blocks.0.attn.hook_pattern"])

        def zero(z, hook):
            return z.index_fill(2, torch.tensor([2]), 0.0)

        with hooks(model, {"blocks.0.attn.hook_z": zero}):
            ablated = model(tokens, return_type="loss")
    assert scope["ablated"].item() == pytest.approx(ablated.item(), abs=1e-6)
    assert abs(scope["ablated"].item() - scope["loss"].item()) > 1e-4


def test_the_pattern_recipe_gives_layer_0s_pattern(model_and_idx):
    model, idx = model_and_idx
    scope = run_recipe(RECIPES[1], model, idx)
    assert scope["pattern"].shape == (1, 4, 10, 10)
    torch.testing.assert_close(scope["pattern"].sum(-1), torch.ones(1, 4, 10))
    torch.testing.assert_close(scope["logits"], model(idx), atol=1e-5, rtol=0)


def test_the_knockout_recipe_moves_the_logits_after_position_0_only(model_and_idx):
    model, idx = model_and_idx
    with torch.no_grad():
        clean = model(idx)
    knocked = run_recipe(RECIPES[2], model, idx)["knocked"]
    assert torch.equal(knocked[:, 0], clean[:, 0])
    assert (knocked[:, 1:] - clean[:, 1:]).abs().max().item() > 1e-4


def test_the_mlp_patch_recipe_changes_the_last_position_only(model_and_idx):
    model, idx = model_and_idx
    with torch.no_grad():
        clean = model(idx)
    patched = run_recipe(RECIPES[3], model, idx)["patched"]
    assert torch.equal(patched[:, :-1], clean[:, :-1])
    assert (patched[:, -1] - clean[:, -1]).abs().max().item() > 1e-4
